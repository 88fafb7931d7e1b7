"""A served app's process gets the server collector thresholds when the kernel is installed."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest
from platformkit.gc_thresholds import SERVING_THRESHOLDS
from platformkit.http import create_app


@pytest.fixture
def default_thresholds() -> Iterator[None]:
    saved = gc.get_threshold()
    gc.set_threshold(700, 10, 10)
    yield
    gc.set_threshold(*saved)


def test_installing_the_kernel_sets_the_serving_thresholds(default_thresholds: None) -> None:
    create_app(title="gc", version="1")
    assert gc.get_threshold() == SERVING_THRESHOLDS
