"""Text ids: prefix + 32 lowercase hex digits, strict parsing (00-CONVENTIONS.md §1.2)."""

from __future__ import annotations

import uuid

import pytest
from agentbus.ids import (
    PREFIXES,
    InvalidId,
    format_id,
    new_id,
    new_signing_kid,
    parse_any_id,
    parse_id,
)
from hypothesis import given
from hypothesis import strategies as st
from platformkit.ids import uuid7

EXAMPLE = uuid.UUID("01a12f72-923b-7c4d-9e8f-0a1b2c3d4e5f")


def test_conventions_example() -> None:
    assert format_id("msg", EXAMPLE) == "msg_01a12f72923b7c4d9e8f0a1b2c3d4e5f"
    assert parse_id("msg", "msg_01a12f72923b7c4d9e8f0a1b2c3d4e5f", require_v7=True) == EXAMPLE


@given(st.uuids(), st.sampled_from(sorted(PREFIXES)))
def test_round_trip(value: uuid.UUID, prefix: str) -> None:
    text = format_id(prefix, value)
    assert len(text) == (35 if prefix == "ws" else 36)
    assert parse_id(prefix, text) == value
    assert parse_any_id(text) == (prefix, value)


@pytest.mark.parametrize(
    "text",
    [
        "msg_01A12F72923B7C4D9E8F0A1B2C3D4E5F",  # uppercase
        "msg_01a12f72-923b-7c4d-9e8f-0a1b2c3d4e5f",  # hyphens
        "msg_{01a12f72923b7c4d9e8f0a1b2c3d4e5f}",  # braces
        "01a12f72923b7c4d9e8f0a1b2c3d4e5f",  # no prefix
        "tok_01a12f72923b7c4d9e8f0a1b2c3d4e5f",  # another table's prefix
        "msg_01a12f72923b7c4d9e8f0a1b2c3d4e5",  # 31 digits
        "msg_01a12f72923b7c4d9e8f0a1b2c3d4e5f0",  # 33 digits
        "msg__01a12f72923b7c4d9e8f0a1b2c3d4e5f",
        " msg_01a12f72923b7c4d9e8f0a1b2c3d4e5f",
        "msg_01a12f72923b7c4d9e8f0a1b2c3d4e5f\n",
    ],
)
def test_strict_parsing(text: str) -> None:
    with pytest.raises(InvalidId):
        parse_id("msg", text)


def test_client_ids_must_be_v7() -> None:
    v4 = uuid.UUID("01a12f72-923b-4c4d-9e8f-0a1b2c3d4e5f")
    wrong_variant = uuid.UUID("01a12f72-923b-7c4d-0e8f-0a1b2c3d4e5f")
    for value in (v4, wrong_variant):
        text = format_id("cnv", value)
        assert parse_id("cnv", text) == value
        with pytest.raises(InvalidId, match="UUIDv7"):
            parse_id("cnv", text, require_v7=True)
    assert parse_id("cnv", format_id("cnv", uuid7()), require_v7=True)


def test_unknown_prefix_and_type_errors() -> None:
    with pytest.raises(ValueError, match="unknown id prefix"):
        format_id("xyz", EXAMPLE)
    with pytest.raises(ValueError, match="unknown id prefix"):
        parse_id("xyz", "xyz_01a12f72923b7c4d9e8f0a1b2c3d4e5f")
    with pytest.raises(InvalidId):
        parse_any_id("xyz_01a12f72923b7c4d9e8f0a1b2c3d4e5f")
    with pytest.raises(TypeError):
        format_id("msg", "01a12f72923b7c4d9e8f0a1b2c3d4e5f")  # type: ignore[arg-type]


def test_new_ids_sort_by_creation() -> None:
    first, second = new_id("tok"), new_id("tok")
    assert first[1] < second[1]
    assert first[0] < second[0]
    assert first[1] == format_id("tok", first[0])
    kid = new_signing_kid()
    assert kid.startswith("sk_")
    assert len(kid) == 35
    assert int(kid[3:], 16) >= 0
