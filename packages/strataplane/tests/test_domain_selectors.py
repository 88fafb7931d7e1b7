"""Selector semantics (spec-format.md §2.3) as a table, and every parse diagnostic."""

from __future__ import annotations

from typing import Any

import pytest
from strataplane.domain.spec.diagnostics import Collector, SpecError
from strataplane.domain.spec.selectors import (
    EMPTY,
    normalize_arch,
    normalize_os,
    parse_selector,
    selector_from_json,
)

HOST = {"os": "linux", "env": "prod", "zone": "a", "host.kind": "server"}

CASES: list[tuple[dict[str, Any], dict[str, str], bool]] = [
    ({}, HOST, True),
    ({}, {}, True),
    ({"matchLabels": {}}, {}, True),
    ({"matchExpressions": []}, HOST, True),
    ({"matchLabels": {"os": "linux"}}, HOST, True),
    ({"matchLabels": {"os": "Linux"}}, HOST, False),
    ({"matchLabels": {"os": "linux", "env": "dev"}}, HOST, False),
    ({"matchLabels": {"missing": ""}}, HOST, False),
    ({"matchLabels": {"host.kind": "server"}}, HOST, True),
    (
        _in := {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a", "b"]}]},
        HOST,
        True,
    ),
    (_in, {"zone": "c"}, False),
    (_in, {}, False),
    (
        _notin := {"matchExpressions": [{"key": "zone", "operator": "NotIn", "values": ["a"]}]},
        HOST,
        False,
    ),
    (_notin, {"zone": "b"}, True),
    (_notin, {}, True),  # a host without the label matches NotIn
    (_ex := {"matchExpressions": [{"key": "zone", "operator": "Exists"}]}, HOST, True),
    (_ex, {"zone": ""}, True),
    (_ex, {}, False),
    (
        _dne := {"matchExpressions": [{"key": "zone", "operator": "DoesNotExist", "values": []}]},
        HOST,
        False,
    ),
    (_dne, {"os": "linux"}, True),
    (
        {
            "matchLabels": {"os": "linux"},
            "matchExpressions": [
                {"key": "zone", "operator": "In", "values": ["a", "b"]},
                {"key": "zone", "operator": "NotIn", "values": ["b"]},
            ],
        },
        HOST,
        True,
    ),
    (
        {
            "matchExpressions": [
                {"key": "zone", "operator": "In", "values": ["a"]},
                {"key": "zone", "operator": "NotIn", "values": ["a"]},
            ]
        },
        HOST,
        False,
    ),
]


@pytest.mark.parametrize(("raw", "labels", "expected"), CASES)
def test_semantics(raw: dict[str, Any], labels: dict[str, str], expected: bool) -> None:
    selector = selector_from_json(raw)
    assert selector.matches(labels) is expected
    assert selector.to_json() == raw  # absent fields stay absent, empty ones stay empty


def test_empty_selector() -> None:
    assert EMPTY.is_empty
    assert EMPTY.to_json() == {}
    assert EMPTY.matches({})
    assert selector_from_json({"matchLabels": {}, "matchExpressions": []}).is_empty


def _codes(raw: object) -> list[tuple[str, str | None]]:
    out = Collector("layers/x.toml")
    parse_selector(raw, out, "selector")
    return [(d.code, d.pointer) for d in out.diagnostics]


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ({"matchLabels": {"Bad Key": "x"}}, [("SP-3001", 'selector.matchLabels."Bad Key"')]),
        ({"matchLabels": {"-x": "x"}}, [("SP-3001", "selector.matchLabels.-x")]),
        (
            {"matchExpressions": [{"key": "a", "operator": "in", "values": ["x"]}]},
            [("SP-3002", "selector.matchExpressions[0].operator")],
        ),
        (
            {"matchExpressions": [{"key": "a", "operator": "In", "values": []}]},
            [("SP-3003", "selector.matchExpressions[0].values")],
        ),
        (
            {"matchExpressions": [{"key": "a", "operator": "NotIn"}]},
            [("SP-3003", "selector.matchExpressions[0].values")],
        ),
        (
            {"matchExpressions": [{"key": "a", "operator": "Exists", "values": ["x"]}]},
            [("SP-3003", "selector.matchExpressions[0].values")],
        ),
        ({"matchLabels": {"port": 80}}, [("SP-3004", "selector.matchLabels.port")]),
        ({"matchLabels": {"host": {"kind": "client"}}}, [("SP-3004", "selector.matchLabels.host")]),
        ({"matchLabels": {"a": "x" * 257}}, [("SP-3004", "selector.matchLabels.a")]),
        ({"matchLabels": {"a": "x\ny"}}, [("SP-3004", "selector.matchLabels.a")]),
        ({"matchLabels": {"os": "Linux"}}, [("SP-3005", "selector.matchLabels.os")]),
        ({"matchLabels": {"arch": "x86_64"}}, [("SP-3005", "selector.matchLabels.arch")]),
        (
            {"matchExpressions": [{"key": "host.kind", "operator": "In", "values": ["vm"]}]},
            [("SP-3005", "selector.matchExpressions[0].values[0]")],
        ),
        ({"matchLabel": {}}, [("SP-2002", "selector.matchLabel")]),
        ("os=linux", [("SP-2003", "selector")]),
        ({"matchExpressions": [{"key": "a"}]}, [("SP-2001", "selector.matchExpressions[0]")]),
    ],
)
def test_parse_diagnostics(raw: object, expected: list[tuple[str, str]]) -> None:
    assert _codes(raw) == expected


def test_possible_builtin_values_get_no_warning() -> None:
    raw = {"matchLabels": {"os": "plan9", "arch": "amd64", "host.kind": "pod"}}
    assert _codes(raw) == []


def test_json_form_rejects_errors_but_not_warnings() -> None:
    with pytest.raises(SpecError):
        selector_from_json({"matchLabels": {"port": 80}})
    assert selector_from_json({"matchLabels": {"os": "Linux"}}).matches({"os": "Linux"})


@pytest.mark.parametrize(
    ("reported", "os"), [("Linux", "linux"), ("windows", "windows"), ("Plan9", "plan9")]
)
def test_normalize_os(reported: str, os: str) -> None:
    assert normalize_os(reported) == os


@pytest.mark.parametrize(
    ("reported", "arch"),
    [
        ("x86_64", "amd64"),
        ("AARCH64", "arm64"),
        ("i686", "386"),
        ("armv7l", "arm"),
        ("MIPS", "mips"),
    ],
)
def test_normalize_arch(reported: str, arch: str) -> None:
    assert normalize_arch(reported) == arch
