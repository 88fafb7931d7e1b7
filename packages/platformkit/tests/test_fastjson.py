"""The orjson paths give the same answers as the standard encoders."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from platformkit.fastjson import canonical_candidate, dumps
from wirekit.canonical import canonical_json_parsed

scalars = st.none() | st.booleans() | st.text()
json_values = st.recursive(
    scalars
    | st.integers(min_value=-(10**30), max_value=10**30)
    | st.floats(allow_nan=False, allow_infinity=False),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(), children),
    max_leaves=12,
)
# what orjson encodes exactly as the canonical form does: no floats, 64-bit integers
exact_values = st.recursive(
    scalars | st.integers(min_value=-(2**63), max_value=2**63 - 1),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(), children),
    max_leaves=12,
)


@settings(max_examples=200, deadline=None)
@given(json_values)
def test_dumps_reads_back_as_the_same_value(value: Any) -> None:
    assert json.loads(dumps(value)) == value


@settings(max_examples=200, deadline=None)
@given(exact_values)
def test_the_candidate_is_the_canonical_encoding_without_floats(value: Any) -> None:
    parsed = json.loads(json.dumps(value))
    assert canonical_candidate(parsed) == canonical_json_parsed(parsed)


def test_the_candidate_differs_on_some_floats() -> None:
    parsed = json.loads(json.dumps({"f": 1.5e-7}))
    assert canonical_candidate(parsed) != canonical_json_parsed(parsed)
