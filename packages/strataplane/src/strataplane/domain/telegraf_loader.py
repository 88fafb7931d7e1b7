"""What Telegraf's loader (config/config.go) and its agent start-up do with a parsed
configuration, from the facts of a catalog bundle: the first reason the process exits, in
Telegraf's own words, or None when it runs.

- a plugin name no registry holds: ``undefined but requested input: <name>``;
- an option the plugin does not use: ``plugin inputs.<name>: configuration specified the
  fields ["<option>"], but they were not used``; a value of the wrong type fails the unmarshal
  the same way;
- an option past its deprecation's removal version: ``plugin options "<option>" deprecated``;
- a plugin whose ``Init()`` fails: ``could not initialize input <name>: <error>`` (the rules
  kept here are those of plugins whose Init checks only their own options).

The simulated Telegraf exits on it, and level ``sandbox`` of artifact_validation runs it on
every new artifact as the stand-in for the agent's own binary (decisions/0033).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from strataplane.domain.catalog import Bundle, Finding, check_telegraf

__all__ = ["Refusal", "loader_refusal"]


@dataclass(frozen=True)
class Refusal:
    """Why the loader exits: Telegraf's message, the plugin it names and how to fix it."""

    section: str
    plugin: str
    alias: str | None
    option: str | None
    message: str
    fix: str | None

    def finding(self) -> Finding:
        return Finding(self.section, self.plugin, self.alias, self.option, self.message, self.fix)


def _http_init(options: Mapping[str, Any], _: str) -> tuple[str, str] | None:
    # plugins/inputs/http: Init refuses both token sources
    if options.get("token_file") and options.get("token"):
        return "either use 'token_file' or 'token' not both", "set token or token_file, not both"
    return None


def _heartbeat_init(options: Mapping[str, Any], version: str) -> tuple[str, str] | None:
    # plugins/outputs/heartbeat: Init accepts these include values only (1.38 added two)
    allowed = {"hostname", "statistics", "configs"}
    if not _before(version, (1, 38)):
        allowed |= {"logs", "status"}
    for value in options.get("include", ["hostname"]):
        if value not in allowed:
            return (
                f"invalid 'include' setting {json.dumps(value)}",
                f"include only {', '.join(sorted(allowed))} on Telegraf {version}",
            )
    return None


def _before(version: str, line: tuple[int, int]) -> bool:
    try:
        return tuple(int(p) for p in version.split(".")[:2]) < line
    except ValueError:
        return False


_INIT: dict[tuple[str, str], Callable[[Mapping[str, Any], str], tuple[str, str] | None]] = {
    ("inputs", "http"): _http_init,
    ("outputs", "heartbeat"): _heartbeat_init,
}


def _instances(config: Mapping[str, Any], section: str, plugin: str) -> list[Mapping[str, Any]]:
    plugins = config.get(section)
    found = plugins.get(plugin, []) if isinstance(plugins, Mapping) else []
    listed = found if isinstance(found, list) else [found]
    return [options for options in listed if isinstance(options, Mapping)]


def loader_refusal(
    bundle: Bundle | None, config: Mapping[str, Any], version: str
) -> Refusal | None:
    """Why Telegraf ``version`` would exit on this parsed configuration; None if it runs.
    Without a bundle (a release line not catalogued) only the Init rules are applied."""
    if bundle is not None:
        for f in check_telegraf(bundle, config):
            kind = f.section.rstrip("s")
            if f.option is None:
                message = f"undefined but requested {kind}: {f.plugin}"
            elif "removed" in f.message:
                message = f'plugin options "{f.option}" deprecated'
            else:
                message = (
                    f"plugin {f.section}.{f.plugin}: configuration specified the fields "
                    f'["{f.option}"], but they were not used'
                )
            return Refusal(f.section, f.plugin, f.alias, f.option, message, f.fix)
    for (section, plugin), init in _INIT.items():
        for options in _instances(config, section, plugin):
            failed = init(options, version)
            if failed:
                alias = options.get("alias")
                message = f"could not initialize {section.rstrip('s')} {plugin}: {failed[0]}"
                return Refusal(
                    section,
                    plugin,
                    alias if isinstance(alias, str) else None,
                    None,
                    message,
                    failed[1],
                )
    return None
