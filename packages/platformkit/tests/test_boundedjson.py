"""Bounded JSON: depth and size refused before the parser recurses."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st
from platformkit.boundedjson import JsonRefused, loads, loads_for_storage, nesting_depth
from platformkit.storable import find_unstorable

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=4), children, max_size=3)
    ),
    max_leaves=25,
)


def _depth(value: object) -> int:
    if isinstance(value, list):
        return 1 + max((_depth(v) for v in value), default=0)
    if isinstance(value, dict):
        return 1 + max((_depth(v) for v in value.values()), default=0)
    return 0


@given(json_values)
def test_depth_scan_agrees_with_the_value(value: object) -> None:
    text = json.dumps(value)
    assert nesting_depth(text) == _depth(value)
    assert nesting_depth(text.encode()) == _depth(value)
    assert loads(text.encode(), max_depth=64) == value


def test_brackets_inside_strings_do_not_count() -> None:
    text = json.dumps({"s": "[[[[{{{{" * 50, "q": 'a\\"[[[' * 20})
    assert nesting_depth(text) == 1
    assert loads(text, max_depth=2)["s"].startswith("[[[[")


@pytest.mark.parametrize("depth", [65, 5_000, 100_000])
def test_deep_documents_are_refused_not_recursed(depth: int) -> None:
    with pytest.raises(JsonRefused, match="nested deeper than 64 levels"):
        loads(b"[" * depth + b"]" * depth)
    with pytest.raises(JsonRefused, match="nested deeper"):
        loads('{"a":' * depth + "1" + "}" * depth)


def test_unbalanced_brackets_count_as_deep_and_are_refused() -> None:
    assert nesting_depth(b"[" * 100_000) == 100_000
    assert nesting_depth(b"[[[[]]]", limit=64) == 4
    with pytest.raises(JsonRefused, match="nested deeper"):
        loads(b"[" * 100_000)
    with pytest.raises(JsonRefused, match="not valid JSON"):
        loads(b"[}")


def test_size_and_syntax_and_digits() -> None:
    with pytest.raises(JsonRefused, match="larger than 10 bytes"):
        loads(b'{"a": "0123456789"}', max_bytes=10)
    with pytest.raises(JsonRefused, match="not valid JSON"):
        loads(b'{"a": ')
    with pytest.raises(JsonRefused, match="not valid JSON"):
        loads(b"\xff\xfe\x00garbage")
    with pytest.raises(JsonRefused, match="not valid JSON"):
        loads(b"1" * 5000)
    assert loads(b"[" * 64 + b"]" * 64) is not None
    assert loads(bytearray(b'{"ok": true}')) == {"ok": True}


@given(json_values | st.just({"n": 2**70}) | st.just([1e400]) | st.just({"k\x00": "\ud800"}))
def test_storage_hint_never_misses_a_problem(value: object) -> None:
    for raw in (
        json.dumps(value),
        json.dumps(value).encode(),
        json.dumps(value, ensure_ascii=False),
    ):
        try:
            parsed, suspect = loads_for_storage(raw)
        except UnicodeEncodeError:
            continue
        if find_unstorable(parsed) is not None:
            assert suspect


def test_storage_hint_passes_plain_documents() -> None:
    plain = b'{"name": "app.tasks.add", "id": "01900190019001900190", "args": [1, 2.5e10], "n": 12}'
    assert loads_for_storage(plain) == (json.loads(plain), False)
    assert loads_for_storage(b'{"a": "caf\\u00e9"}')[1] is False
    assert loads_for_storage(b'{"a": "x\\u0000"}')[1] is True
    assert loads_for_storage(b'{"a": "\\ud800"}')[1] is True
    assert loads_for_storage(b'{"a": 1180591620717411303424}')[1] is True
    assert loads_for_storage(b'{"a": 1e400}')[1] is True
    assert loads_for_storage(b'{"a": NaN}')[1] is True
