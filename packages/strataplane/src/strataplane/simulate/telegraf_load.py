"""What a simulated Telegraf does with a fetched configuration before it runs it, following
Telegraf's loader (config/config.go) and agent start-up:

- a plugin name no registry holds: ``undefined but requested input: <name>``;
- an option the plugin does not use: ``plugin inputs.<name>: line N: configuration specified
  the fields ["<option>"], but they were not used``; a value of the wrong type fails the
  unmarshal the same way;
- an option past its deprecation's removal version: ``plugin options "<option>" deprecated``;
- a plugin whose ``Init()`` fails: ``could not initialize input <name>: <error>`` (the rules
  kept here are those of plugins whose Init checks only their own options).

Each of these makes Telegraf exit (a reload is a full stop and start). The plugin facts are
those of the shipped catalog bundle of the simulated version's release line; a version
without one is loaded without option checks.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from functools import lru_cache
from typing import Any

import zstandard

from strataplane.catalog import shipped_bundles
from strataplane.domain.catalog import Bundle, check_telegraf, parse_bundle, pick_bundle

__all__ = ["startup_error"]


@lru_cache(maxsize=1)
def _bundles() -> dict[str, Bundle]:
    out = {}
    for path, _ in shipped_bundles():
        bundle = parse_bundle(zstandard.ZstdDecompressor().decompress(path.read_bytes()))
        out[bundle.version] = bundle
    return out


def _http_init(options: Mapping[str, Any]) -> str | None:
    # plugins/inputs/http: Init refuses both token sources
    if options.get("token_file") and options.get("token"):
        return "either use 'token_file' or 'token' not both"
    return None


def _heartbeat_init(options: Mapping[str, Any], version: str) -> str | None:
    # plugins/outputs/heartbeat: Init accepts these include values only (1.38 added two)
    allowed = {"hostname", "statistics", "configs"}
    if not _before(version, (1, 38)):
        allowed |= {"logs", "status"}
    for value in options.get("include", ["hostname"]):
        if value not in allowed:
            return f"invalid 'include' setting {json.dumps(value)}"
    return None


def _before(version: str, line: tuple[int, int]) -> bool:
    return tuple(int(p) for p in version.split(".")[:2]) < line


_INIT: dict[tuple[str, str], Callable[[Mapping[str, Any], str], str | None]] = {
    ("inputs", "http"): lambda options, _: _http_init(options),
    ("outputs", "heartbeat"): _heartbeat_init,
}


@lru_cache(maxsize=256)
def _bundle_for(version: str) -> Bundle | None:
    chosen = pick_bundle(list(_bundles()), version)
    return None if chosen is None else _bundles()[chosen]


def startup_error(config: Mapping[str, Any], version: str) -> str | None:
    """Why Telegraf ``version`` would exit on this parsed configuration; None if it runs."""
    bundle = _bundle_for(version)
    if bundle is not None:
        for f in check_telegraf(bundle, config):
            if f.option is None:
                return f"undefined but requested {f.section.rstrip('s')}: {f.plugin}"
            if "removed" in f.message:
                return f'plugin options "{f.option}" deprecated'
            return (
                f"plugin {f.section}.{f.plugin}: configuration specified the fields "
                f'["{f.option}"], but they were not used'
            )
    for (section, plugin), init in _INIT.items():
        for options in config.get(section, {}).get(plugin, []):
            failed = init(options, version)
            if failed:
                return f"could not initialize {section.rstrip('s')} {plugin}: {failed}"
    return None
