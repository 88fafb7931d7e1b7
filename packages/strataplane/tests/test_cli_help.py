"""``strataplane --help`` and its commands' help print every text as written (rich, which
renders them, would swallow ``[default: ...]`` as markup)."""

from __future__ import annotations

from platformkit.testing.cli import mangled_help
from strataplane.cli import app


def test_the_cli_help_prints_as_written() -> None:
    assert mangled_help(app) == []
