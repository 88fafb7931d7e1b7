"""Field checks of the kinds that carry agent configuration: Layer, Bundle, Route, Journey
(spec-format.md §3.1 … §3.3, §3.5).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from strataplane.domain.spec.agentconfig import Scheme, check_config, scan_values
from strataplane.domain.spec.diagnostics import at
from strataplane.domain.spec.fields import AGENT_KINDS, Fields
from strataplane.domain.spec.objects import (
    PARAM_TYPES,
    Facts,
    Inclusion,
    NameRef,
    ParamDecl,
    param_value_ok,
)
from strataplane.domain.spec.selectors import parse_selector
from strataplane.domain.spec.versions import RequirementError, parse_requirement

__all__ = [
    "COMMON",
    "OBJECT_NAME",
    "check_bundle",
    "check_journey",
    "check_layer",
    "check_route",
    "parse_dotted_key",
]

OBJECT_NAME = re.compile(r"[a-z0-9]([a-z0-9.-]{0,251}[a-z0-9])?")
_PARAM_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]{0,62}")
_DOTTED = re.compile(
    r"[ \t]*(?:(?P<bare>[A-Za-z0-9_-]+)|\"(?P<basic>(?:[^\"\\\x00-\x1f\x7f]|\\.)*)\""
    r"|'(?P<literal>[^'\x00-\x1f\x7f]*)')[ \t]*(?P<dot>\.|\Z)"
)
_ESCAPE = re.compile(r"\\(?:u([0-9A-Fa-f]{4})|U([0-9A-Fa-f]{8})|(.))")
_SIMPLE = {"b": "\b", "t": "\t", "n": "\n", "f": "\f", "r": "\r", '"': '"', "\\": "\\"}
MAX_SCRIPT_BYTES = 256 * 1024
COMMON = ("owner", "description")


def parse_dotted_key(text: str) -> tuple[str, ...]:
    """The keys of a TOML dotted key such as ``'sources."my.app"'``; ValueError if malformed."""
    keys: list[str] = []
    pos = 0
    while True:
        m = _DOTTED.match(text, pos)
        if m is None:
            raise ValueError(f"{text!r} is not a dotted key")
        if m["bare"] is not None:
            keys.append(m["bare"])
        elif m["literal"] is not None:
            keys.append(m["literal"])
        else:
            keys.append(_ESCAPE.sub(_unescape, m["basic"]))
        pos = m.end()
        if m["dot"] == "":
            return tuple(keys)


def _unescape(m: re.Match[str]) -> str:
    if m[3] is not None:
        if m[3] not in _SIMPLE:
            raise ValueError(f"invalid escape \\{m[3]}")
        return _SIMPLE[m[3]]
    return chr(int(m[1] or m[2], 16))


def _schemes(agent_kind: str | None, *more: Scheme) -> frozenset[Scheme]:
    env: tuple[Scheme, ...] = ("env",) if agent_kind in ("telegraf", "vector") else ()
    return frozenset(("secret", *env, *more))


def _agent_kind(f: Fields, facts: Facts) -> str | None:
    facts.agent_kind = f.string("agentKind", choices=AGENT_KINDS, what="agent kind")
    return facts.agent_kind


def _config(f: Fields, facts: Facts, *, kind: str, schemes: frozenset[Scheme]) -> None:
    config = f.table_at("config")
    if config is None or facts.agent_kind is None:
        return
    check_config(f.out, config, f.at("config"), kind=kind, agent_kind=facts.agent_kind)
    expands = facts.agent_kind in ("telegraf", "vector")
    found = scan_values(f.out, config, f.at("config"), allowed=schemes, expands_env=expands)
    facts.references += found


def check_layer(f: Fields, facts: Facts) -> None:
    fields = ("agentKind", "agentVersions", "precedence", "selector", "bundles", "routes")
    f.known((*COMMON, *fields, "remove", "config"), ("agentKind",))
    agent_kind = _agent_kind(f, facts)
    if (text := f.string("agentVersions")) is not None:
        try:
            requirement = parse_requirement(text)
        except RequirementError as exc:
            f.out.add("SP-3006", f.at("agentVersions"), f"invalid version requirement: {exc}")
        else:
            if requirement.satisfiable:
                facts.agent_versions = requirement
            else:
                f.out.add("SP-3007", f.at("agentVersions"), f"no version satisfies {text!r}")
    f.integer("precedence", -(2**31), 2**31 - 1)
    if "selector" in f.table:
        parse_selector(f.table["selector"], f.out, f.at("selector"))
    seen: set[str] = set()
    for entry in f.tables("bundles") or []:
        entry.known(("name", "params"), ("name",))
        name = entry.string("name", pattern=OBJECT_NAME, what="Bundle name")
        params = entry.table_at("params") or {}
        if name is None:
            continue
        if name in seen:
            f.out.add("SP-2005", entry.pointer, f"Bundle {name!r} is included twice")
        seen.add(name)
        facts.inclusions.append(Inclusion(name, params, entry.pointer or ""))
        expands = agent_kind in ("telegraf", "vector")
        allowed = _schemes(agent_kind)
        found = scan_values(f.out, params, entry.at("params"), allowed=allowed, expands_env=expands)
        facts.references += found
    for i, route in enumerate(f.strings("routes", pattern=OBJECT_NAME, what="Route name") or []):
        facts.names.append(NameRef("Route", route, at(f.at("routes"), i)))
    for i, path in enumerate(f.strings("remove") or []):
        try:
            parse_dotted_key(path)
        except ValueError as exc:
            f.out.add("SP-2004", at(f.at("remove"), i), f"invalid config path: {exc}")
    _config(f, facts, kind="Layer", schemes=_schemes(agent_kind))


def check_bundle(f: Fields, facts: Facts) -> None:
    f.known((*COMMON, "agentKind", "params", "config"), ("agentKind", "config"))
    agent_kind = _agent_kind(f, facts)
    for name, decl in sorted((f.table_at("params") or {}).items()):
        pointer = at(f.at("params"), name)
        if not _PARAM_NAME.fullmatch(name):
            f.out.add("SP-2004", pointer, f"invalid parameter name {name!r}")
            continue
        if not isinstance(decl, Mapping):
            f.out.add("SP-2003", pointer, "a parameter declaration is a table")
            continue
        d = Fields(f.out, decl, pointer)
        d.known(("type", "default", "description"), ("type",))
        d.string("description")
        ptype = d.string("type", choices=PARAM_TYPES)
        if ptype is None:
            continue
        if "default" in decl and not param_value_ok(ptype, decl["default"]):
            f.out.add("SP-2003", d.at("default"), f"default is not a {ptype}")
            continue
        facts.params[name] = ParamDecl(ptype, "default" in decl, decl.get("default"))
    _config(f, facts, kind="Bundle", schemes=_schemes(agent_kind, "param"))
    for ref in facts.references:
        if ref.scheme == "param" and ref.name not in facts.params:
            msg = f"parameter {ref.name!r} is not declared (or its declaration is invalid)"
            f.out.add("SP-4007", ref.pointer, msg)


def check_route(f: Fields, facts: Facts) -> None:
    f.known((*COMMON, "agentKind", "config"), ("agentKind", "config"))
    agent_kind = _agent_kind(f, facts)
    if agent_kind == "strataplane-agent":
        f.out.add("SP-2009", f.at("agentKind"), "strataplane-agent has no Routes")
        return
    _config(f, facts, kind="Route", schemes=_schemes(agent_kind))


def check_journey(f: Fields, facts: Facts) -> None:
    fields = ("script", "selector", "interval", "timeout", "enabled", "vars", "allowHosts")
    f.known((*COMMON, *fields), ("script",))
    facts.agent_kind = "strataplane-agent"
    script = f.string("script")
    if script is not None and len(script.encode("utf-8")) > MAX_SCRIPT_BYTES:
        f.invalid("script", "script is larger than 256 KiB")
    if "selector" in f.table:
        parse_selector(f.table["selector"], f.out, f.at("selector"))
    interval = f.duration("interval") if "interval" in f.table else 300_000
    timeout = f.duration("timeout") if "timeout" in f.table else 60_000
    if interval is not None and not 60_000 <= interval <= 86_400_000:
        f.invalid("interval", "interval must be from 1m to 24h")
    if timeout is not None and timeout > 600_000:
        f.invalid("timeout", "timeout must be at most 10m")
    elif timeout is not None and interval is not None and timeout > interval:
        f.invalid("timeout", "timeout must be at most interval")
    f.boolean("enabled")
    f.strings("allowHosts")
    variables = f.sub("vars")
    if variables is not None:
        for name, value in sorted(variables.table.items()):
            if not isinstance(value, str):
                f.out.add("SP-2003", variables.at(name), "vars values are strings")
        allowed: frozenset[Scheme] = frozenset({"secret"})
        facts.references += scan_values(f.out, variables.table, variables.pointer, allowed=allowed)
