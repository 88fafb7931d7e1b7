"""Audit chains: hash definition, tamper detection naming the first bad row, signed checkpoints."""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
from collections.abc import Mapping
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from hypothesis import given, settings
from hypothesis import strategies as st
from platformkit.audit import (
    GENESIS,
    AuditChain,
    AuditRow,
    BreakReason,
    Checkpoint,
    chain_hash,
    sign_checkpoint,
    verify_chain,
    verify_checkpoint,
)

KEY = b"s" * 32
ATTACKER_KEY = b"a" * 32

events_st = st.dictionaries(
    st.text(max_size=5),
    st.none() | st.booleans() | st.integers() | st.text(max_size=10),
    max_size=4,
)
chains_st = st.lists(events_st, min_size=2, max_size=10)
# Each tamper property runs a few dozen cases: enough to hit first, middle and last positions
# while keeping the module fast.
tamper = settings(max_examples=40)


def build(events: list[dict[str, Any]], key: bytes | None = None) -> list[AuditRow]:
    chain = AuditChain(key=key)
    return [chain.append(e) for e in events]


def renumber(rows: list[AuditRow]) -> list[AuditRow]:
    return [dataclasses.replace(r, seq=i + 1) for i, r in enumerate(rows)]


def assert_first_bad(rows: list[AuditRow], index: int, reason: BreakReason, **kw: Any) -> None:
    result = verify_chain(rows, **kw)
    assert not result.ok
    assert not result
    assert (result.bad_index, result.reason) == (index, reason), result
    assert result.bad_seq == rows[index].seq
    assert result.checked == index
    if index:
        assert (result.head_seq, result.head_hash) == (rows[index - 1].seq, rows[index - 1].hash)


# --- definition -------------------------------------------------------------------------------


def test_genesis_is_32_zero_bytes_and_none_means_genesis() -> None:
    assert GENESIS == b"\x00" * 32
    assert chain_hash(None, {"a": 1}) == chain_hash(GENESIS, {"a": 1})
    assert chain_hash(None, {"a": 1}) == hashlib.sha256(b"\x00" * 32 + b'{"a":1}').digest()


def test_keyed_variant_is_hmac_of_the_same_message() -> None:
    prev = bytes(range(32))
    expected = hmac.new(KEY, prev + b'{"a":null,"b":[1,"x"]}', hashlib.sha256).digest()
    assert chain_hash(prev, {"b": [1, "x"], "a": None}, key=KEY) == expected
    assert chain_hash(prev, {"a": None, "b": [1, "x"]}) != expected


def test_bad_inputs_refused() -> None:
    with pytest.raises(ValueError, match="32 bytes"):
        chain_hash(b"short", {})
    with pytest.raises(ValueError, match="at least 32"):
        chain_hash(None, {}, key=b"short")
    with pytest.raises(ValueError, match="at least 32"):
        AuditChain(key=b"short")


def test_append_links_rows() -> None:
    rows = build([{"n": 1}, {"n": 2}, {"n": 3}])
    assert [r.seq for r in rows] == [1, 2, 3]
    assert rows[0].prev_hash == GENESIS
    assert rows[1].prev_hash == rows[0].hash
    assert rows[2].hash == chain_hash(rows[1].hash, {"n": 3})


def test_resume_from_stored_head() -> None:
    rows = build([{"n": 1}, {"n": 2}])
    resumed = AuditChain(head=rows[-1].hash, next_seq=rows[-1].seq + 1)
    rows.append(resumed.append({"n": 3}))
    assert verify_chain(rows).ok
    assert resumed.head == rows[-1].hash
    assert resumed.next_seq == 4


def test_repr_does_not_show_key() -> None:
    assert KEY.decode() not in repr(AuditChain(key=KEY))
    assert KEY.hex() not in repr(AuditChain(key=KEY))


# --- verifying intact chains ------------------------------------------------------------------


@tamper
@given(st.lists(events_st, max_size=12), st.booleans())
def test_intact_chain_verifies(events: list[dict[str, Any]], keyed: bool) -> None:
    key = KEY if keyed else None
    rows = build(events, key)
    result = verify_chain(rows, key=key)
    assert result.ok
    assert result.checked == len(rows)
    assert result.head_hash == (rows[-1].hash if rows else GENESIS)
    assert result.bad_index is None


def test_keyed_chain_fails_without_or_with_wrong_key() -> None:
    rows = build([{"n": 1}, {"n": 2}], KEY)
    assert verify_chain(rows, key=KEY).ok
    assert_first_bad(rows, 0, BreakReason.HASH_MISMATCH)
    assert_first_bad(rows, 0, BreakReason.HASH_MISMATCH, key=ATTACKER_KEY)


def test_segment_from_a_known_point() -> None:
    rows = build([{"n": i} for i in range(6)])
    assert verify_chain(rows[3:], start_prev=rows[2].hash, start_seq=4).ok
    assert_first_bad(rows[3:], 0, BreakReason.PREV_LINK_BROKEN, start_seq=4)
    assert_first_bad(rows[3:], 0, BreakReason.SEQ_GAP, start_prev=rows[2].hash)


@dataclasses.dataclass(frozen=True)
class NullableRow:
    """A row read from a table whose prev_hash column is NULL for the first row."""

    seq: int
    event: Mapping[str, Any]
    prev_hash: bytes | None
    hash: bytes


def test_null_prev_hash_column_means_genesis() -> None:
    rows = build([{"n": 1}, {"n": 2}])
    first = NullableRow(rows[0].seq, rows[0].event, None, rows[0].hash)
    assert verify_chain([first, rows[1]]).ok


def test_event_that_is_not_json_is_reported() -> None:
    rows = build([{"n": 1}, {"n": 2}])
    rows[1] = dataclasses.replace(rows[1], event={"n": float("nan")})
    assert_first_bad(rows, 1, BreakReason.BAD_EVENT)


# --- tampering (each must name the first bad row) ---------------------------------------------


@tamper
@given(chains_st, st.data(), st.booleans())
def test_edited_event_detected_at_that_row(
    events: list[dict[str, Any]], data: st.DataObject, keyed: bool
) -> None:
    key = KEY if keyed else None
    rows = build(events, key)
    k = data.draw(st.integers(0, len(rows) - 1))
    rows[k] = dataclasses.replace(rows[k], event={"wrapped": rows[k].event})
    assert_first_bad(rows, k, BreakReason.HASH_MISMATCH, key=key)


@tamper
@given(chains_st, st.data())
def test_edited_and_rehashed_row_detected_at_next_row(
    events: list[dict[str, Any]], data: st.DataObject
) -> None:
    rows = build(events)
    k = data.draw(st.integers(0, len(rows) - 2))
    forged = {"wrapped": rows[k].event}
    rows[k] = dataclasses.replace(rows[k], event=forged, hash=chain_hash(rows[k].prev_hash, forged))
    assert_first_bad(rows, k + 1, BreakReason.PREV_LINK_BROKEN)


@tamper
@given(chains_st, st.data())
def test_keyed_chain_rehash_without_key_detected_at_that_row(
    events: list[dict[str, Any]], data: st.DataObject
) -> None:
    rows = build(events, KEY)
    k = data.draw(st.integers(0, len(rows) - 1))
    forged = {"wrapped": rows[k].event}
    new_hash = chain_hash(rows[k].prev_hash, forged, key=ATTACKER_KEY)
    rows[k] = dataclasses.replace(rows[k], event=forged, hash=new_hash)
    assert_first_bad(rows, k, BreakReason.HASH_MISMATCH, key=KEY)


@tamper
@given(chains_st, st.data())
def test_deleted_row_detected_as_gap(events: list[dict[str, Any]], data: st.DataObject) -> None:
    rows = build(events)
    k = data.draw(st.integers(0, len(rows) - 2))
    del rows[k]
    assert_first_bad(rows, k, BreakReason.SEQ_GAP)


@tamper
@given(chains_st, st.data())
def test_deleted_row_with_renumbering_detected_as_broken_link(
    events: list[dict[str, Any]], data: st.DataObject
) -> None:
    rows = build(events)
    k = data.draw(st.integers(0, len(rows) - 2))
    del rows[k]
    assert_first_bad(renumber(rows), k, BreakReason.PREV_LINK_BROKEN)


@tamper
@given(chains_st, st.data())
def test_reordered_rows_detected_at_first_moved_position(
    events: list[dict[str, Any]], data: st.DataObject
) -> None:
    rows = build(events)
    i = data.draw(st.integers(0, len(rows) - 2))
    j = data.draw(st.integers(i + 1, len(rows) - 1))
    rows[i], rows[j] = rows[j], rows[i]
    # Read in stored order the moved row carries a later seq than expected.
    assert_first_bad(rows, i, BreakReason.SEQ_GAP)
    # With seqs rewritten to look consecutive, the hash link gives it away.
    assert_first_bad(renumber(rows), i, BreakReason.PREV_LINK_BROKEN)


@tamper
@given(chains_st, st.data())
def test_step_back_in_seq_is_out_of_order(
    events: list[dict[str, Any]], data: st.DataObject
) -> None:
    rows = build(events)
    k = data.draw(st.integers(1, len(rows) - 1))
    replayed = rows[data.draw(st.integers(0, k - 1))]
    rows.insert(k, replayed)
    assert_first_bad(rows, k, BreakReason.OUT_OF_ORDER)


@tamper
@given(chains_st, st.data(), events_st)
def test_inserted_row_detected(
    events: list[dict[str, Any]], data: st.DataObject, forged: dict[str, Any]
) -> None:
    rows = build(events)
    k = data.draw(st.integers(0, len(rows) - 1))
    prev = rows[k - 1].hash if k else GENESIS
    rows.insert(k, AuditRow(k + 1, forged, prev, chain_hash(prev, forged)))
    rows = renumber(rows)
    # A well-formed forgery in a plain chain passes itself; its successor's link breaks.
    assert_first_bad(rows, k + 1, BreakReason.PREV_LINK_BROKEN)


@tamper
@given(chains_st, st.data(), events_st)
def test_inserted_row_in_keyed_chain_detected_at_itself(
    events: list[dict[str, Any]], data: st.DataObject, forged: dict[str, Any]
) -> None:
    rows = build(events, KEY)
    k = data.draw(st.integers(0, len(rows)))
    prev = rows[k - 1].hash if k else GENESIS
    rows.insert(k, AuditRow(k + 1, forged, prev, chain_hash(prev, forged, key=ATTACKER_KEY)))
    assert_first_bad(renumber(rows), k, BreakReason.HASH_MISMATCH, key=KEY)


# --- checkpoints -----------------------------------------------------------------------------


@pytest.fixture
def signer() -> Ed25519PrivateKey:
    return Ed25519PrivateKey.generate()


def test_checkpoint_sign_verify_and_roundtrip(signer: Ed25519PrivateKey) -> None:
    rows = build([{"n": 1}, {"n": 2}])
    cp = sign_checkpoint(signer, rows[-1].seq, rows[-1].hash, chain="tenant-1")
    assert verify_checkpoint(signer.public_key(), cp)
    again = Checkpoint.from_dict(cp.to_dict())
    assert again == cp
    assert verify_checkpoint(signer.public_key(), again)


@pytest.mark.parametrize(
    "tamper",
    [
        lambda cp: dataclasses.replace(cp, seq=cp.seq + 1),
        lambda cp: dataclasses.replace(cp, hash=bytes([cp.hash[0] ^ 1]) + cp.hash[1:]),
        lambda cp: dataclasses.replace(cp, chain="tenant-2"),
        lambda cp: dataclasses.replace(
            cp, signature=bytes([cp.signature[0] ^ 1]) + cp.signature[1:]
        ),
        lambda cp: dataclasses.replace(cp, signature=b""),
        lambda cp: dataclasses.replace(cp, hash=b"short"),
    ],
)
def test_checkpoint_tamper_detected(signer: Ed25519PrivateKey, tamper: Any) -> None:
    cp = sign_checkpoint(signer, 7, bytes(range(32)), chain="tenant-1")
    assert verify_checkpoint(signer.public_key(), cp)
    assert not verify_checkpoint(signer.public_key(), tamper(cp))


def test_checkpoint_wrong_public_key(signer: Ed25519PrivateKey) -> None:
    cp = sign_checkpoint(signer, 1, GENESIS)
    assert not verify_checkpoint(Ed25519PrivateKey.generate().public_key(), cp)


def test_checkpoint_catches_deleted_tail(signer: Ed25519PrivateKey) -> None:
    rows = build([{"n": i} for i in range(5)])
    cp = sign_checkpoint(signer, rows[-1].seq, rows[-1].hash)
    assert verify_chain(rows, checkpoint=cp).ok
    truncated = rows[:3]
    assert verify_chain(truncated).ok  # the chain alone cannot see a missing tail
    result = verify_chain(truncated, checkpoint=cp)
    assert (result.reason, result.bad_index, result.bad_seq) == (BreakReason.TRUNCATED, 3, 4)
    assert verify_chain([], checkpoint=cp).reason is BreakReason.TRUNCATED


def test_checkpoint_catches_rewritten_plain_chain(signer: Ed25519PrivateKey) -> None:
    events = [{"n": i} for i in range(5)]
    rows = build(events)
    cp = sign_checkpoint(signer, 4, rows[3].hash)
    rewritten = build([*events[:2], {"n": "forged"}, *events[3:]])
    assert verify_chain(rewritten).ok
    assert_first_bad(rewritten, 3, BreakReason.CHECKPOINT_MISMATCH, checkpoint=cp)


def test_checkpoint_before_segment_is_a_usage_error(signer: Ed25519PrivateKey) -> None:
    rows = build([{"n": i} for i in range(4)])
    cp = sign_checkpoint(signer, 1, rows[0].hash)
    with pytest.raises(ValueError, match="before"):
        verify_chain(rows[2:], start_prev=rows[1].hash, start_seq=3, checkpoint=cp)
