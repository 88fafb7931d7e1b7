"""What PostgreSQL cannot store is found before a statement runs, and scrubbed where kept."""

from __future__ import annotations

import json

import psycopg
import pytest
from hypothesis import example, given
from hypothesis import strategies as st
from platformkit.storable import (
    BIGINT_MAX,
    BIGINT_MIN,
    INT4_MAX,
    PgBigInt,
    PgText,
    Unstorable,
    find_unstorable,
    scrub,
    unstorable_reason,
)
from pydantic import BaseModel, ValidationError

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=5), children, max_size=4)
    ),
    max_leaves=20,
)


def test_text_reasons() -> None:
    assert unstorable_reason("plain") is None
    assert unstorable_reason("héllo wörld ✓") is None
    assert unstorable_reason("a\x00b") == "contains a NUL character"
    assert unstorable_reason("é\x00") == "contains a NUL character"
    assert unstorable_reason("a\ud800b") == "contains a lone surrogate"
    assert unstorable_reason(json.loads('"\\ud83d\\ude00"')) is None  # a pair is one character


def test_first_problem_is_named_by_its_path() -> None:
    batch = {"events": [{"name": "ok"}, {"args": {"name": "x\x00"}}]}
    problem = find_unstorable(batch)
    assert isinstance(problem, Unstorable)
    assert (problem.path, problem.reason) == ("events[1].args.name", "contains a NUL character")
    assert find_unstorable({"retry_count": 2**70}, path="event").path == "event.retry_count"  # type: ignore[union-attr]
    assert find_unstorable({"n": BIGINT_MAX}) is None
    assert find_unstorable({"n": BIGINT_MIN - 1}).reason == "integer out of range"  # type: ignore[union-attr]
    assert find_unstorable([INT4_MAX + 1], int_max=INT4_MAX).path == "[0]"  # type: ignore[union-attr]
    assert find_unstorable(float("nan")).reason == "not a finite number"  # type: ignore[union-attr]
    assert find_unstorable({"a\x00": 1}).reason == "contains a NUL character"  # type: ignore[union-attr]
    assert find_unstorable({"odd key": [1, True, None, 1.5]}) is None


def test_deep_values_do_not_exhaust_the_stack() -> None:
    deep: object = "x\x00"
    for _ in range(100_000):
        deep = [deep]
    problem = find_unstorable(deep)
    assert problem is not None
    assert problem.path.count("[0]") == 100_000


@given(json_values)
@example({"0": [float("inf")], "": {"\x00": None}})  # bad text after another kind of problem
def test_scrubbed_values_hold_only_storable_text(value: object) -> None:
    scrubbed, changed = scrub(value)
    remaining = find_unstorable(scrubbed, int_min=-(2**200), int_max=2**200)
    assert remaining is None or remaining.reason in {"integer out of range", "not a finite number"}
    assert changed == _has_bad_text(value)


def _has_bad_text(value: object) -> bool:
    """Whether any string of ``value``, keys too, holds what PostgreSQL cannot store, whatever
    else in it cannot be stored either."""
    if isinstance(value, str):
        return unstorable_reason(value) is not None
    if isinstance(value, dict):
        return any(_has_bad_text(k) or _has_bad_text(v) for k, v in value.items())
    if isinstance(value, list):
        return any(_has_bad_text(v) for v in value)
    return False


def test_scrub_marks_and_keeps_what_it_can() -> None:
    value = {"k\x00": ["a\ud800", "fine"], "n": 3}
    scrubbed, changed = scrub(value)
    assert changed
    assert scrubbed == {"k\ufffd": ["a\ufffd", "fine"], "n": 3}
    clean = {"a": ["b"]}
    assert scrub(clean) == (clean, False)
    assert scrub(clean)[0] is clean


class Named(BaseModel):
    name: PgText
    limit: PgBigInt = 0


def test_pydantic_types_refuse_with_the_field_named() -> None:
    assert Named(name="ok", limit=BIGINT_MAX).name == "ok"
    with pytest.raises(ValidationError) as refused:
        Named(name="a\x00b")
    assert refused.value.errors()[0]["loc"] == ("name",)
    with pytest.raises(ValidationError) as too_big:
        Named(name="ok", limit=2**63)
    assert too_big.value.errors()[0]["loc"] == ("limit",)


@pytest.mark.parametrize(
    ("text", "number"),
    [("a\x00b", 1), ("fine", 2**63), ("fine", -(2**63) - 1), ("ok", 2**63 - 1), ("é✓", -(2**63))],
)
def test_agrees_with_postgresql(fresh_database: str, text: str, number: int) -> None:
    predicted_ok = find_unstorable({"t": text, "n": number}) is None
    with psycopg.connect(fresh_database, autocommit=True) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS probe (t text, n bigint)")
        try:
            conn.execute("INSERT INTO probe VALUES (%s, %s)", (text, number))
            stored = True
        except (psycopg.DataError, psycopg.errors.NumericValueOutOfRange):
            stored = False
        except OverflowError:  # psycopg refuses an int past bigint before sending it
            stored = False
    assert stored == predicted_ok
