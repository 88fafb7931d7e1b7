"""The ``config`` trees of Layers, Bundles and Routes (spec-format.md §4.5, §4.6).

``check_config`` enforces the per-agent-kind structure (keyed plugin instances and component
ids, destinations only in Routes, renderer-reserved keys: SP-2003, SP-2007, SP-2008).
``scan_values`` walks free-form values for references (SP-4005), environment expansion in
Telegraf and Vector strings (SP-4006) and literal credentials (SP-4011), and returns the
well-formed references it found for the cross-file checks.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from strataplane.domain.spec.diagnostics import Collector, at
from strataplane.domain.vector_components import RESERVED, TOP_LEVEL, unknown_type

__all__ = ["Reference", "check_config", "parse_reference", "scan_values"]

type Scheme = Literal["secret", "param", "env"]

_REF_NAMES: dict[Scheme, re.Pattern[str]] = {
    "secret": re.compile(r"[A-Za-z0-9_]{1,128}"),
    "param": re.compile(r"[A-Za-z][A-Za-z0-9_]{0,62}"),
    "env": re.compile(r"[A-Za-z_][A-Za-z0-9_]*"),
}
_ENV_EXPANSION = re.compile(r"\$\{|\$[A-Za-z_]")
_CREDENTIAL_WORDS = (
    *("password", "token", "secret", "api_key", "apikey", "private_key", "passphrase"),
)
_ID = re.compile(r"[a-z0-9][a-z0-9_-]{0,62}")
_TELEGRAF_PLUGINS = ("inputs", "processors", "aggregators", "outputs")
_DESTINATIONS = {"telegraf": ("outputs",), "elastic-agent": ("outputs",), "vector": ("sinks",)}
_ROUTE_SECTIONS: dict[str, tuple[str, ...]] = {
    "telegraf": ("outputs",),
    "elastic-agent": ("outputs",),
    "vector": ("sinks", "transforms"),
}
_COMPONENTS = {"vector": ("sources", "transforms", "sinks"), "elastic-agent": ("inputs", "outputs")}


@dataclass(frozen=True, slots=True)
class Reference:
    scheme: Scheme
    name: str
    pointer: str


def parse_reference(value: str) -> tuple[Scheme, str | None] | None:
    """(scheme, name) of a reference string, name None when malformed; None for plain text."""
    for scheme, pattern in _REF_NAMES.items():
        prefix = f"{scheme}://"
        if value.startswith(prefix):
            name = value[len(prefix) :]
            return scheme, name if pattern.fullmatch(name) else None
    return None


def _is_credential_key(key: str) -> bool:
    lowered = key.lower()
    return any(lowered == w or lowered.endswith("_" + w) for w in _CREDENTIAL_WORDS)


def scan_values(
    out: Collector,
    value: object,
    pointer: str | None,
    *,
    allowed: frozenset[Scheme],
    expands_env: bool = False,
    key: str | None = None,
) -> list[Reference]:
    """Check every string below ``value``; return the well-formed references."""
    found: list[Reference] = []
    if isinstance(value, Mapping):
        for k, item in value.items():
            found += scan_values(
                out, item, at(pointer, k), allowed=allowed, expands_env=expands_env, key=k
            )
    elif isinstance(value, list):
        for i, item in enumerate(value):
            found += scan_values(
                out, item, at(pointer, i), allowed=allowed, expands_env=expands_env
            )
    elif isinstance(value, str):
        ref = parse_reference(value)
        if ref is None:
            if expands_env and _ENV_EXPANSION.search(value):
                msg = "the agent would expand environment variables here; write env://NAME"
                out.add("SP-4006", pointer, msg)
            if key is not None and value and _is_credential_key(key):
                out.add("SP-4011", pointer, f"literal credential in {key!r}; use secret://NAME")
        elif ref[1] is None:
            out.add("SP-4005", pointer, f"malformed {ref[0]}:// reference {value!r}")
        elif ref[0] not in allowed:
            out.add("SP-4005", pointer, f"{ref[0]}:// references are not allowed here")
        else:
            found.append(Reference(ref[0], ref[1], pointer or ""))
    return found


def check_config(
    out: Collector, config: Mapping[str, object], pointer: str, *, kind: str, agent_kind: str
) -> None:
    """The §4.6 structure of ``config`` for a Layer, Bundle or Route of ``agent_kind``."""
    route = kind == "Route"
    only = _ROUTE_SECTIONS.get(agent_kind, ()) if route else None
    for section in sorted(config):
        here = at(pointer, section)
        if only is not None and section not in only:
            out.add("SP-2007", here, f"a {agent_kind} Route holds only {', '.join(only)}")
            continue
        if not route and section in _DESTINATIONS.get(agent_kind, ()):
            out.add("SP-2007", here, f"destinations ({section}) are declared only in Routes")
            continue
        value = config[section]
        if agent_kind == "telegraf":
            _telegraf_section(out, section, value, here)
        elif agent_kind == "vector" and section in RESERVED:
            out.add("SP-2007", here, f"{section} is reserved to the renderer and the host")
        elif agent_kind == "vector" and section not in TOP_LEVEL:
            out.add("SP-2007", here, f"Vector has no top-level option {section!r}")
        elif agent_kind in ("vector", "elastic-agent") and section in _COMPONENTS[agent_kind]:
            _components(out, section, value, here, vector=agent_kind == "vector")


def _telegraf_section(out: Collector, section: str, value: object, here: str) -> None:
    if section == "secretstores":
        out.add("SP-2007", here, "secretstores is reserved to the renderer")
    elif section not in (*_TELEGRAF_PLUGINS, "agent", "global_tags"):
        out.add("SP-2007", here, f"unknown Telegraf section {section!r}")
    elif not isinstance(value, Mapping):
        out.add("SP-2003", here, f"{section} is a table")
    elif section in _TELEGRAF_PLUGINS:
        for plugin, instances in sorted(value.items()):
            p = at(here, plugin)
            if section == "outputs" and plugin == "heartbeat":
                out.add("SP-2007", p, "outputs.heartbeat is reserved to the renderer")
            elif not isinstance(instances, Mapping):
                out.add("SP-2003", p, "a plugin is a table of instances: <plugin>.<instance>")
            else:
                for name, options in sorted(instances.items()):
                    _instance(out, name, options, at(p, name), telegraf=True)


def _components(out: Collector, section: str, value: object, here: str, *, vector: bool) -> None:
    if not isinstance(value, Mapping):
        out.add("SP-2003", here, f"{section} is a table of components by id")
        return
    for name, options in sorted(value.items()):
        p = at(here, name)
        if vector and name.startswith("strataplane_"):
            out.add("SP-2007", p, "ids starting with strataplane_ are reserved to the renderer")
        elif _instance(out, name, options, p, telegraf=False) and vector:
            assert isinstance(options, Mapping)
            if (why := unknown_type(section, options.get("type"))) is not None:
                out.add("SP-2011", at(p, "type"), why)
            if section == "sinks" and "inputs" not in options:
                out.add("SP-2001", p, "a sink must list its inputs")


def _instance(out: Collector, name: str, options: object, p: str, *, telegraf: bool) -> bool:
    if not _ID.fullmatch(name):
        out.add("SP-2008", p, f"invalid {'instance key' if telegraf else 'id'} {name!r}")
        return False
    if not isinstance(options, Mapping):
        out.add("SP-2008", p, "options belong in a table per instance or component")
        return False
    if telegraf and "alias" in options:
        out.add("SP-2007", at(p, "alias"), "alias is set by the renderer from the instance key")
    return True
