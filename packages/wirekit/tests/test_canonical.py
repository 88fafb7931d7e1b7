"""Canonical JSON: fixed byte form, strict type checks, and the public surface of wirekit."""

from __future__ import annotations

import enum
import hashlib
import json
import math
import random
from typing import Any

import pytest
import wirekit
from hypothesis import given, settings
from hypothesis import strategies as st
from wirekit import canonical_hash, canonical_json

json_scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text()
)
json_values = st.recursive(
    json_scalars,
    lambda children: (
        st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=8), children, max_size=5)
    ),
    max_leaves=25,
)
# Each property runs 50 cases: ample for an encoder this small, and it keeps the suite fast.
properties = settings(max_examples=50)


def _shuffled(value: Any, rng: random.Random) -> Any:
    """Rebuild every dict with its keys inserted in a random order."""
    if isinstance(value, dict):
        items = list(value.items())
        rng.shuffle(items)
        return {k: _shuffled(v, rng) for k, v in items}
    if isinstance(value, list):
        return [_shuffled(v, rng) for v in value]
    return value


def test_public_api_is_locked() -> None:
    assert sorted(wirekit.__all__) == ["canonical_hash", "canonical_json", "canonical_json_parsed"]


def test_known_bytes() -> None:
    value = {"b": [1, 2.5, None, True], "a": "é", "c": {"z": False, "y": "x"}}
    expected = '{"a":"é","b":[1,2.5,null,true],"c":{"y":"x","z":false}}'
    assert canonical_json(value) == expected.encode()


def test_non_ascii_is_raw_utf8_not_escaped() -> None:
    assert canonical_json("ü€😀") == b'"' + "ü€😀".encode() + b'"'


def test_tuple_encodes_like_list() -> None:
    assert canonical_json((1, "a")) == canonical_json([1, "a"]) == b'[1,"a"]'


def test_keys_sorted_by_code_point() -> None:
    assert canonical_json({"b": 1, "B": 2, "a": 3, "é": 4}) == '{"B":2,"a":3,"b":1,"é":4}'.encode()


def test_hash_is_sha256_of_canonical_bytes() -> None:
    value = {"k": [1, 2]}
    assert canonical_hash(value) == hashlib.sha256(b'{"k":[1,2]}').hexdigest()
    assert len(canonical_hash(value)) == 64


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf, [1.0, math.nan], {"x": math.inf}])
def test_non_finite_floats_rejected(bad: Any) -> None:
    with pytest.raises(ValueError, match="non-finite"):
        canonical_json(bad)


class Colour(enum.Enum):
    RED = "red"


class Level(enum.IntEnum):
    LOW = 1


class Name(str):
    pass


@pytest.mark.parametrize(
    "bad",
    [
        {1: "int key"},
        {None: "none key"},
        {True: "bool key"},
        {("a",): "tuple key"},
        b"bytes",
        {1, 2},
        object(),
        Colour.RED,
        Level.LOW,
        Name("subclass"),
        [1, {"nested": b"x"}],
        {"a": {"b": [object()]}},
    ],
)
def test_non_json_types_rejected(bad: Any) -> None:
    with pytest.raises(TypeError):
        canonical_json(bad)


def test_lone_surrogate_rejected() -> None:
    with pytest.raises(UnicodeEncodeError):
        canonical_json("\ud800")


@properties
@given(json_values)
def test_roundtrips_through_json(value: Any) -> None:
    assert json.loads(canonical_json(value)) == value


@properties
@given(json_values)
def test_is_a_fixed_point(value: Any) -> None:
    encoded = canonical_json(value)
    assert canonical_json(json.loads(encoded)) == encoded


@properties
@given(json_values, st.randoms(use_true_random=False))
def test_independent_of_key_insertion_order(value: Any, rng: random.Random) -> None:
    assert canonical_json(_shuffled(value, rng)) == canonical_json(value)
    assert canonical_hash(_shuffled(value, rng)) == canonical_hash(value)


no_space_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(alphabet="abcé😀,:"),
    lambda children: (
        st.lists(children, max_size=5)
        | st.dictionaries(st.text(alphabet="xyz", max_size=4), children, max_size=5)
    ),
    max_leaves=25,
)


@properties
@given(no_space_values)
def test_no_insignificant_whitespace(value: Any) -> None:
    # The generated strings contain no whitespace, so any whitespace byte came from the encoder.
    encoded = canonical_json(value)
    assert not any(ch in encoded for ch in b" \t\r\n")


@properties
@given(json_values, json_values)
def test_distinct_values_hash_differently(a: Any, b: Any) -> None:
    if json.loads(canonical_json(a)) != json.loads(canonical_json(b)):
        assert canonical_hash(a) != canonical_hash(b)


@given(json_values)
def test_parsed_variant_agrees_on_parsed_values(value: Any) -> None:
    import json

    from wirekit.canonical import canonical_json_parsed

    parsed = json.loads(json.dumps(value))
    assert canonical_json_parsed(parsed) == canonical_json(parsed)


def test_parsed_variant_still_refuses_nan() -> None:
    import json

    import pytest
    from wirekit.canonical import canonical_json_parsed

    with pytest.raises(ValueError, match="JSON compliant"):
        canonical_json_parsed(json.loads('{"x": NaN}'))
