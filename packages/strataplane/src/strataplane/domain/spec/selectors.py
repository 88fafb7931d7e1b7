"""Label selectors (spec-format.md §2): parsing with SP-3xxx diagnostics, matching a label set,
the JSON form, and the built-in labels with their normalization of agent facts.

A selector matches when every ``matchLabels`` entry and every expression holds; the empty
selector matches every host; ``NotIn`` matches a host that lacks the key.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from strataplane.domain.spec.diagnostics import Collector, SpecError, at

__all__ = [
    "BUILTIN_LABELS",
    "EMPTY",
    "HOST_KINDS",
    "LABEL_KEY",
    "OPERATORS",
    "Expression",
    "Selector",
    "label_key_ok",
    "label_value_problem",
    "normalize_arch",
    "normalize_os",
    "parse_selector",
    "selector_from_json",
]

type Operator = Literal["In", "NotIn", "Exists", "DoesNotExist"]
OPERATORS: tuple[Operator, ...] = ("In", "NotIn", "Exists", "DoesNotExist")
BUILTIN_LABELS = ("host.name", "host.kind", "owner", "os", "arch")
HOST_KINDS = ("server", "client", "pod")

LABEL_KEY = re.compile(r"[a-z0-9]([a-z0-9_./-]{0,126}[a-z0-9])?")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_ARCH = {"x86_64": "amd64", "amd64": "amd64", "aarch64": "arm64", "arm64": "arm64"}
_ARCH |= {"i386": "386", "i686": "386", "x86": "386", "armv6l": "arm", "armv7l": "arm"}
_ARCH |= {"arm": "arm"}


@dataclass(frozen=True, slots=True)
class Expression:
    key: str
    operator: Operator
    values: tuple[str, ...] | None  # None: absent in the source

    def holds(self, labels: Mapping[str, str]) -> bool:
        value = labels.get(self.key)
        match self.operator:
            case "In":
                return value is not None and value in (self.values or ())
            case "NotIn":
                return value is None or value not in (self.values or ())
            case "Exists":
                return value is not None
            case "DoesNotExist":
                return value is None


@dataclass(frozen=True, slots=True)
class Selector:
    """A parsed selector; ``None`` fields were absent in the source and stay absent in JSON."""

    match_labels: tuple[tuple[str, str], ...] | None = None
    match_expressions: tuple[Expression, ...] | None = None

    def matches(self, labels: Mapping[str, str]) -> bool:
        if any(labels.get(k) != v for k, v in self.match_labels or ()):
            return False
        return all(e.holds(labels) for e in self.match_expressions or ())

    @property
    def is_empty(self) -> bool:
        return not self.match_labels and not self.match_expressions

    def keys(self) -> frozenset[str]:
        """Every label key the selector reads."""
        keys = {k for k, _ in self.match_labels or ()}
        return frozenset(keys | {e.key for e in self.match_expressions or ()})

    def to_json(self) -> dict[str, object]:
        out: dict[str, object] = {}
        if self.match_labels is not None:
            out["matchLabels"] = dict(self.match_labels)
        if self.match_expressions is not None:
            out["matchExpressions"] = [
                {"key": e.key, "operator": e.operator}
                | ({} if e.values is None else {"values": list(e.values)})
                for e in self.match_expressions
            ]
        return out


EMPTY = Selector()


def label_key_ok(key: str) -> bool:
    return LABEL_KEY.fullmatch(key) is not None


def label_value_problem(value: object) -> str | None:
    """Why ``value`` cannot be a label value, or None."""
    if not isinstance(value, str):
        return "label values are strings (quote numbers and booleans; quote keys with '.')"
    if len(value) > 256:
        return "label value longer than 256 characters"
    if _CONTROL.search(value):
        return "control character in a label value"
    return None


def normalize_os(reported: str) -> str:
    """The ``os`` built-in label for a reported operating system."""
    return reported.lower()


def normalize_arch(reported: str) -> str:
    """The ``arch`` built-in label for a reported architecture."""
    lowered = reported.lower()
    return _ARCH.get(lowered, lowered)


def _impossible(key: str, value: str) -> bool:
    if key == "os":
        return normalize_os(value) != value
    if key == "arch":
        return normalize_arch(value) != value
    return key == "host.kind" and value not in HOST_KINDS


def parse_selector(
    value: object, out: Collector, pointer: str | None, *, extra: frozenset[str] = frozenset()
) -> Selector | None:
    """Parse a selector table, reporting into ``out``; None when it is not a table.

    ``extra`` names sibling fields the caller handles (``agentKinds`` of a Secret grant).
    """
    if not isinstance(value, Mapping):
        out.add("SP-2003", pointer, "a selector is a table")
        return None
    for field in sorted(set(value) - {"matchLabels", "matchExpressions"} - extra):
        out.add("SP-2002", at(pointer, field), f"unknown selector field {field!r}")
    labels = _match_labels(value.get("matchLabels"), out, at(pointer, "matchLabels"))
    raw = value.get("matchExpressions")
    expressions: tuple[Expression, ...] | None = None
    if raw is not None:
        if isinstance(raw, list):
            items = enumerate(raw)
            parsed = (_expression(e, out, at(at(pointer, "matchExpressions"), i)) for i, e in items)
            expressions = tuple(e for e in parsed if e is not None)
        else:
            out.add("SP-2003", at(pointer, "matchExpressions"), "an array of tables")
    return Selector(labels, expressions)


def _check_value(key: str, value: object, out: Collector, pointer: str) -> str | None:
    problem = label_value_problem(value)
    if problem:
        out.add("SP-3004", pointer, problem)
        return None
    assert isinstance(value, str)
    if _impossible(key, value):
        out.add("SP-3005", pointer, f"no host can have {key} = {value!r}")
    return value


def _check_key(key: object, out: Collector, pointer: str) -> bool:
    if isinstance(key, str) and label_key_ok(key):
        return True
    out.add("SP-3001", pointer, f"invalid label key {key!r}")
    return False


def _match_labels(raw: object, out: Collector, pointer: str) -> tuple[tuple[str, str], ...] | None:
    if raw is None:
        return None
    if not isinstance(raw, Mapping):
        out.add("SP-2003", pointer, "matchLabels is a table of label key to value")
        return None
    pairs = []
    for key in sorted(raw):
        ok = _check_key(key, out, at(pointer, key))
        value = _check_value(key, raw[key], out, at(pointer, key))
        if ok and value is not None:
            pairs.append((key, value))
    return tuple(pairs)


def _expression(raw: object, out: Collector, pointer: str) -> Expression | None:
    if not isinstance(raw, Mapping):
        out.add("SP-2003", pointer, "an expression is a table { key, operator, values }")
        return None
    for field in sorted(set(raw) - {"key", "operator", "values"}):
        out.add("SP-2002", at(pointer, field), f"unknown expression field {field!r}")
    key, operator, values = raw.get("key"), raw.get("operator"), raw.get("values")
    if key is None or operator is None:
        out.add("SP-2001", pointer, "an expression needs key and operator")
        return None
    key_ok = _check_key(key, out, at(pointer, "key"))
    if operator not in OPERATORS:
        out.add("SP-3002", at(pointer, "operator"), f"unknown operator {operator!r}")
        return None
    checked: list[str] = []
    if values is not None and not isinstance(values, list):
        out.add("SP-2003", at(pointer, "values"), "values is an array of strings")
        return None
    for i, item in enumerate(values or []):
        if (v := _check_value(str(key), item, out, at(at(pointer, "values"), i))) is not None:
            checked.append(v)
    if operator in ("In", "NotIn") and not values:
        out.add("SP-3003", at(pointer, "values"), f"{operator} needs at least one value")
    if operator in ("Exists", "DoesNotExist") and values:
        out.add("SP-3003", at(pointer, "values"), f"{operator} takes no values")
    if not key_ok or len(checked) != len(values or []):
        return None
    assert isinstance(key, str)
    return Expression(key, operator, None if values is None else tuple(checked))


def selector_from_json(value: object) -> Selector:
    """Parse the JSON form (API input, ``jsonb`` columns); ``SpecError`` on any error."""
    out = Collector()
    selector = parse_selector(value, out, None)
    if selector is None or not out.ok:
        raise SpecError([d for d in out.diagnostics if d.severity == "error"])
    return selector
