"""The type schemas are validated with their local references inlined: the same errors at the
same data paths as the schemas as written."""

from __future__ import annotations

from typing import Any

import pytest
from agentbus.gateway.domain.schemas import TYPES, inline_local_refs, schema_of, validator
from hypothesis import given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator  # type: ignore[import-untyped]

scalars = st.none() | st.booleans() | st.integers() | st.text(max_size=12)
values = st.recursive(
    scalars,
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=8), children)
    ),
    max_leaves=12,
)


def _errors(v: Any, data: Any) -> list[tuple[list[Any], str]]:
    return sorted((list(err.path), err.message) for err in v.iter_errors(data))


def _data_for(type_name: str) -> st.SearchStrategy[Any]:
    """Objects built from the schema's own property names, so the nested definitions are
    reached, mixed with arbitrary values."""
    schema = schema_of(type_name)
    names = sorted(schema.get("properties", {})) or ["x"]
    return st.dictionaries(st.sampled_from(names) | st.text(max_size=6), values, max_size=6)


@pytest.mark.parametrize("type_name", sorted(TYPES))
@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_inlined_schema_reports_what_the_written_one_does(type_name: str, data: Any) -> None:
    written = Draft202012Validator(schema_of(type_name))
    value = data.draw(_data_for(type_name))
    assert _errors(validator(type_name), value) == _errors(written, value)


def test_siblings_of_a_reference_stay_and_a_recursive_one_keeps_its_ref() -> None:
    schema = {
        "type": "object",
        "properties": {
            "a": {"$ref": "#/$defs/short", "description": "kept"},
            "tree": {"$ref": "#/$defs/node"},
        },
        "$defs": {
            "short": {"type": "string", "maxLength": 2},
            "node": {"type": "object", "properties": {"child": {"$ref": "#/$defs/node"}}},
        },
    }
    inlined = inline_local_refs(schema)
    assert inlined["properties"]["a"] == {
        "description": "kept",
        "allOf": [{"type": "string", "maxLength": 2}],
    }
    assert "$defs" in inlined  # the recursive definition still refers into them
    v = Draft202012Validator(inlined)
    assert not v.is_valid({"a": "long"})
    assert not v.is_valid({"tree": {"child": {"child": 3}}})
    assert v.is_valid({"a": "ok", "tree": {"child": {"child": {}}}})
