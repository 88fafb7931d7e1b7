"""What a simulated Telegraf does with a fetched configuration before it runs it: the loader
rules of ``domain.telegraf_loader`` with the facts of the shipped catalog bundle of the
simulated version's release line (a version without one is loaded without option checks).
Each refusal makes Telegraf exit (a reload is a full stop and start).
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache
from typing import Any

import zstandard

from strataplane.catalog import shipped_bundles
from strataplane.domain.catalog import Bundle, parse_bundle, pick_bundle
from strataplane.domain.telegraf_loader import loader_refusal

__all__ = ["startup_error"]


@lru_cache(maxsize=1)
def _bundles() -> dict[str, Bundle]:
    out = {}
    for path, _ in shipped_bundles():
        bundle = parse_bundle(zstandard.ZstdDecompressor().decompress(path.read_bytes()))
        out[bundle.version] = bundle
    return out


@lru_cache(maxsize=256)
def _bundle_for(version: str) -> Bundle | None:
    chosen = pick_bundle(list(_bundles()), version)
    return None if chosen is None else _bundles()[chosen]


def startup_error(config: Mapping[str, Any], version: str) -> str | None:
    """Why Telegraf ``version`` would exit on this parsed configuration; None if it runs."""
    refusal = loader_refusal(_bundle_for(version), config, version)
    return None if refusal is None else refusal.message
