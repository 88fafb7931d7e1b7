"""An agent's desired configuration tree at one revision (spec-format.md §4.3 … §4.5), with
provenance: which Layer, and which object inside it, produced every value (for ``explain``).

For each applying Layer in order: delete its ``remove`` paths from the tree so far, build its
contribution (each included Bundle with parameters resolved, then each Route, then its own
``config``), and merge the contribution in. Tables merge key by key, anything else is replaced
whole (arrays too); a table against a non-table fails the render (SP-5002). Equal-precedence
Layers that set one key differently get SP-5003.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import partial
from typing import Literal

from strataplane.domain.spec.agentconfig import parse_reference
from strataplane.domain.spec.diagnostics import Diagnostic, has_errors, key_pointer
from strataplane.domain.spec.kinds_agent import parse_dotted_key
from strataplane.domain.spec.paths import path_for
from strataplane.domain.spec.precedence import LayerRef, applicable_layers, layers_of

__all__ = ["Composition", "Provenance", "compose", "merge_tables"]

type Keys = tuple[str, ...]
_MISSING = object()


@dataclass(frozen=True, slots=True)
class Provenance:
    layer: str  # path of the Layer that brought the value
    source: str  # path of the file whose config holds it: a Bundle, a Route or the Layer
    param: str | None = None  # the Bundle parameter the value came through, if any

    def to_json(self) -> dict[str, str | None]:
        return {"layer": self.layer, "source": self.source, "param": self.param}


@dataclass
class Composition:
    layers: tuple[str, ...]  # applying Layers, in merge order
    config: dict[str, object] = field(default_factory=dict)
    provenance: dict[Keys, Provenance] = field(default_factory=dict)  # per leaf
    diagnostics: list[Diagnostic] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not has_errors(self.diagnostics)

    def explain(self) -> dict[str, dict[str, str | None]]:
        """Provenance by dotted key path, sorted (leaves are non-tables and empty tables)."""
        items = sorted(self.provenance.items())
        return {".".join(key_pointer(k) for k in keys): p.to_json() for keys, p in items}


def merge_tables(
    lower: dict[str, object],
    higher: Mapping[str, object],
    on_leaf: Callable[[Keys, object, object], None],
    on_conflict: Callable[[Keys], None],
    prefix: Keys = (),
) -> None:
    """Merge ``higher`` into ``lower`` in place (§4.4), reporting every leaf written with its
    previous value (or a sentinel) and every table/non-table clash, which keeps ``lower``."""
    for key, high in higher.items():
        keys = (*prefix, key)
        low = lower.get(key, _MISSING)
        if isinstance(low, dict) and isinstance(high, Mapping):
            merge_tables(low, high, on_leaf, on_conflict, keys)
        elif low is not _MISSING and (isinstance(low, dict) or isinstance(high, Mapping)):
            on_conflict(keys)
        else:
            lower[key] = copy.deepcopy(high)
            _leaves(high, keys, low, on_leaf)


def _leaves(value: object, keys: Keys, old: object, on_leaf: Callable[..., None]) -> None:
    if isinstance(value, Mapping) and value:
        for k, v in value.items():
            _leaves(v, (*keys, k), _MISSING, on_leaf)
    else:
        on_leaf(keys, value, old)


def compose(
    objects: Mapping[str, Mapping[str, object]],
    agent_kind: str,
    version: str | None,
    labels: Mapping[str, str],
    *,
    layers: list[LayerRef] | None = None,
) -> Composition:
    """Compose one agent's tree from a parsed, validated tree (path -> value).

    ``layers`` may pass ``layers_of(objects)`` computed once for many agents.
    """
    layers = layers_of(objects) if layers is None else layers
    chosen = applicable_layers(layers, agent_kind, version, labels)
    result = Composition(tuple(layer.path for layer in chosen))
    setters: dict[Keys, tuple[int, str]] = {}  # leaf -> (precedence, Layer path) that set it
    for layer in chosen:
        value = objects[layer.path]
        for text in _strings(value.get("remove")):
            _remove(result, setters, parse_dotted_key(text))
        contribution, origins = _contribution(result, layer, value, objects)
        land = partial(_land, result, setters, layer, origins)
        merge_tables(result.config, contribution, land, _clash(result, layer.path, "lower Layers"))
    return result


def _land(
    result: Composition,
    setters: dict[Keys, tuple[int, str]],
    layer: LayerRef,
    origins: Mapping[Keys, Provenance],
    keys: Keys,
    new: object,
    old: object,
) -> None:
    before = setters.get(keys)
    if before and before[0] == layer.precedence and before[1] != layer.path and old != new:
        msg = f"{before[1]} and {layer.path} (both precedence {layer.precedence}) differ"
        result.diagnostics.append(Diagnostic("SP-5003", layer.path, _pointer(keys), msg))
    setters[keys] = (layer.precedence, layer.path)
    result.provenance[keys] = origins[keys]
    for depth in range(1, len(keys)):  # an empty table that just got contents is no leaf
        result.provenance.pop(keys[:depth], None)
        setters.pop(keys[:depth], None)


def _record(
    origins: dict[Keys, Provenance],
    layer: str,
    source: str,
    via: Mapping[Keys, str],
    keys: Keys,
    new: object,
    old: object,
) -> None:
    origins[keys] = Provenance(layer, source, via.get(keys))


def _pointer(keys: Keys) -> str:
    return ".".join(("config", *(key_pointer(k) for k in keys)))


def _clash(result: Composition, layer: str, other: str) -> Callable[[Keys], None]:
    def report(keys: Keys) -> None:
        msg = f"a table and a non-table meet at {'.'.join(keys)} (against {other})"
        result.diagnostics.append(Diagnostic("SP-5002", layer, _pointer(keys), msg))

    return report


def _strings(value: object) -> list[str]:
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


def _remove(result: Composition, setters: dict[Keys, tuple[int, str]], keys: Keys) -> None:
    table: object = result.config
    for key in keys[:-1]:
        table = table.get(key) if isinstance(table, dict) else None
    if not isinstance(table, dict) or keys[-1] not in table:
        return  # removing a path that does not exist does nothing
    del table[keys[-1]]
    for index in (result.provenance, setters):
        for leaf in [k for k in index if k[: len(keys)] == keys]:
            del index[leaf]


def _contribution(
    result: Composition,
    layer: LayerRef,
    value: Mapping[str, object],
    objects: Mapping[str, Mapping[str, object]],
) -> tuple[dict[str, object], dict[Keys, Provenance]]:
    contribution: dict[str, object] = {}
    origins: dict[Keys, Provenance] = {}
    for source, config, via in _sources(result, layer, value, objects):
        record = partial(_record, origins, layer.path, source, via)
        merge_tables(contribution, config, record, _clash(result, layer.path, source))
    return contribution, origins


def _sources(
    result: Composition,
    layer: LayerRef,
    value: Mapping[str, object],
    objects: Mapping[str, Mapping[str, object]],
) -> list[tuple[str, Mapping[str, object], dict[Keys, str]]]:
    """(path, config, parameter by leaf) of each Bundle, each Route, then the Layer itself."""
    sources: list[tuple[str, Mapping[str, object], dict[Keys, str]]] = []
    entries = value.get("bundles")
    for i, entry in enumerate(entries if isinstance(entries, list) else []):
        name, given = entry.get("name"), entry.get("params") or {}
        bundle = _target(result, layer, "Bundle", name, f"bundles[{i}].name", objects)
        if bundle is not None:
            via: dict[Keys, str] = {}
            missing: list[str] = []
            decls = bundle[1].get("params")
            config = _resolve(bundle[1].get("config") or {}, (), given, decls, via, missing)
            for param in sorted(set(missing)):
                msg = f"parameter {param!r} of {bundle[0]} has no value"
                result.diagnostics.append(Diagnostic("SP-4007", layer.path, f"bundles[{i}]", msg))
            assert isinstance(config, Mapping)
            sources.append((bundle[0], config, via))
    for i, name in enumerate(_strings(value.get("routes"))):
        route = _target(result, layer, "Route", name, f"routes[{i}]", objects)
        if route is not None:
            sources.append((route[0], _table(route[1].get("config")), {}))
    sources.append((layer.path, _table(value.get("config")), {}))
    return sources


def _table(value: object) -> Mapping[str, object]:
    return value if isinstance(value, Mapping) else {}


def _target(
    result: Composition,
    layer: LayerRef,
    kind: Literal["Bundle", "Route"],
    name: object,
    pointer: str,
    objects: Mapping[str, Mapping[str, object]],
) -> tuple[str, Mapping[str, object]] | None:
    try:
        path = path_for(kind, str(name))
    except ValueError:
        path = ""
    target = objects.get(path)
    code = "SP-4001" if kind == "Bundle" else "SP-4002"
    if target is None:
        msg = f"{kind} {name!r} does not exist"
        result.diagnostics.append(Diagnostic(code, layer.path, pointer, msg))
        return None
    if target.get("agentKind") != layer.agent_kind:
        msg = f"{kind} {name!r} is for {target.get('agentKind')}, not {layer.agent_kind}"
        result.diagnostics.append(Diagnostic("SP-4003", layer.path, pointer, msg))
        return None
    return path, target


def _resolve(
    value: object,
    keys: Keys,
    given: Mapping[str, object],
    decls: object,
    via: dict[Keys, str],
    missing: list[str],
) -> object:
    """``value`` with every ``param://NAME`` replaced by the Layer's value or the default."""
    if isinstance(value, Mapping):
        return {k: _resolve(v, (*keys, k), given, decls, via, missing) for k, v in value.items()}
    if isinstance(value, list):  # a parameter inside an array is recorded at the array
        return [_resolve(v, keys, given, decls, via, missing) for v in value]
    ref = parse_reference(value) if isinstance(value, str) else None
    if ref is None or ref[0] != "param" or ref[1] is None:
        return value
    name = ref[1]
    decl = decls.get(name) if isinstance(decls, Mapping) else None
    if name in given:
        via[keys] = name
        return copy.deepcopy(given[name])
    if isinstance(decl, Mapping) and "default" in decl:
        via[keys] = name
        return copy.deepcopy(decl["default"])
    missing.append(name)
    return value
