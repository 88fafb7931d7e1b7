"""Delivery rules without I/O: the message status moves of 05 §2.1, pull triage, nak backoff,
and ack tokens (bound to tenant, agent, message and reply subject; any change is refused)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest
from agentbus.delivery.domain import (
    TERMINAL,
    CopyState,
    Status,
    Triage,
    can_move,
    default_nak_delay_ms,
    message_id_of,
    redrive_refusal,
    sources,
    triage,
)
from agentbus.delivery.tokens import AckTokens, InvalidAckToken, parse_ack_subject
from hypothesis import given, settings
from hypothesis import strategies as st
from platformkit.crypto import Keyring

# 05 §2.1 "Allowed moves", transcribed.
DOC_MOVES = {
    "accepted": {"fetched", "expired", "dead_lettered", "discarded", "bridged"},
    "fetched": {"fetched", "delivered", "read", "expired", "dead_lettered", "discarded"},
    "delivered": {"read", "expired"},
    "dead_lettered": {"accepted"},  # redrive
}


@pytest.mark.parametrize(("current", "to"), [(a, b) for a in Status for b in Status])
def test_status_moves_are_exactly_the_documents(current: Status, to: Status) -> None:
    assert can_move(current, to) is (to.value in DOC_MOVES.get(current.value, set()))


def test_sources_and_terminals() -> None:
    assert sources(Status.DELIVERED) == ["fetched"]
    assert sources(Status.READ) == ["delivered", "fetched"]
    assert sources(Status.EXPIRED) == ["accepted", "delivered", "fetched"]
    assert {s.value for s in TERMINAL} == {
        "read",
        "expired",
        "dead_lettered",
        "discarded",
        "bridged",
    }


NOW = datetime(2026, 10, 12, 9, 30, tzinfo=UTC)


@pytest.mark.parametrize(
    ("state", "verdict"),
    [
        (None, Triage.GONE),
        (CopyState(Status.ACCEPTED, False, None), Triage.DELIVER),
        (CopyState(Status.FETCHED, False, NOW + timedelta(seconds=1)), Triage.DELIVER),
        (CopyState(Status.FETCHED, True, None), Triage.DUPLICATE),
        (CopyState(Status.DELIVERED, False, None), Triage.DUPLICATE),
        (CopyState(Status.READ, False, None), Triage.DUPLICATE),
        (CopyState(Status.DEAD_LETTERED, False, None), Triage.DUPLICATE),
        (CopyState(Status.ACCEPTED, False, NOW), Triage.EXPIRED),
        (CopyState(Status.EXPIRED, False, NOW - timedelta(days=1)), Triage.DUPLICATE),
    ],
)
def test_triage(state: CopyState | None, verdict: Triage) -> None:
    assert triage(state, NOW) is verdict


def test_default_nak_backoff_doubles_up_to_five_minutes() -> None:
    assert [default_nak_delay_ms(a) for a in (1, 2, 3, 9, 10, 50)] == [
        1000, 2000, 4000, 256000, 300000, 300000,
    ]  # fmt: skip


def test_redrive_suffix_is_ignored() -> None:
    assert message_id_of("msg_01a1:r0193ab") == "msg_01a1"
    assert message_id_of("msg_01a1") == "msg_01a1"


STATES = st.builds(
    CopyState,
    st.sampled_from(Status),
    st.booleans(),
    st.none() | st.sampled_from([NOW - timedelta(seconds=1), NOW + timedelta(seconds=1)]),
    st.none() | st.integers(1, 50),
)


@given(STATES, st.integers(1, 60))
def test_only_a_newer_copy_of_a_dead_letter_waits(state: CopyState, seq: int) -> None:
    """A copy newer than a dead-lettered row's sequence is a redrive's, ahead of its commit:
    it waits (nak). Every other copy is judged as if its sequence did not matter."""
    ahead = state.status is Status.DEAD_LETTERED and seq > (state.stream_seq or 0)
    verdict = triage(state, NOW, seq)
    assert (verdict is Triage.AHEAD) is ahead
    if not ahead:
        assert verdict is triage(state, NOW)


@pytest.mark.parametrize(
    ("status", "expires_at", "recipient", "task_request", "refused"),
    [
        (Status.DEAD_LETTERED, None, "online", False, None),
        (Status.DEAD_LETTERED, NOW + timedelta(seconds=1), "disabled", False, None),
        (Status.READ, None, "online", False, "the message is read, not dead_lettered"),
        (Status.ACCEPTED, None, "online", False, "the message is accepted, not dead_lettered"),
        (Status.DEAD_LETTERED, NOW, "online", False, "the message has expired"),
        (Status.DEAD_LETTERED, None, "deleted", False, "the recipient no longer exists"),
        (Status.DEAD_LETTERED, None, None, False, "the recipient no longer exists"),
        (Status.DEAD_LETTERED, None, "online", True, "request the task again"),
    ],
)
def test_what_may_be_redriven(
    status: Status,
    expires_at: datetime | None,
    recipient: str | None,
    task_request: bool,
    refused: str | None,
) -> None:
    reason = redrive_refusal(status, expires_at, NOW, recipient, task_request)
    assert (reason is None) is (refused is None)
    assert refused is None or refused in str(reason)


T, A, M = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
REPLY = f"$JS.ACK.T_{T.hex}.agt_{A.hex}.3.48213.40.1791795600000000000.12"


def test_ack_subjects_in_both_forms() -> None:
    short = parse_ack_subject(REPLY)
    assert (short.stream, short.consumer, short.delivered, short.stream_seq) == (
        f"T_{T.hex}", f"agt_{A.hex}", 3, 48213,
    )  # fmt: skip
    long = parse_ack_subject(f"$JS.ACK.hub.ACCHASH.T_{T.hex}.agt_{A.hex}.3.48213.40.17917.12.r")
    assert (long.stream, long.delivered, long.stream_seq) == (f"T_{T.hex}", 3, 48213)
    for bad in ("foo.bar", "$JS.ACK.a.b.c", "$JS.ACK.T_x.agt_y.x.1.1.1.1"):
        with pytest.raises(InvalidAckToken):
            parse_ack_subject(bad)


def test_tokens_bind_tenant_agent_message_and_subject() -> None:
    tokens = AckTokens.from_keyring(Keyring.in_memory())
    token = tokens.mint(T, A, M, REPLY)
    assert len(token) <= 512
    assert tokens.verify(token, T, A, M).reply == REPLY
    for tenant, agent, msg in ((uuid.uuid4(), A, M), (T, uuid.uuid4(), M), (T, A, uuid.uuid4())):
        with pytest.raises(InvalidAckToken):
            tokens.verify(token, tenant, agent, msg)
    other = AckTokens.from_keyring(Keyring.in_memory())
    with pytest.raises(InvalidAckToken):
        other.verify(token, T, A, M)
    # A subject naming another stream or consumer is refused even with a valid MAC.
    foreign = tokens.mint(T, A, M, REPLY.replace(f"agt_{A.hex}", f"agt_{uuid.uuid4().hex}"))
    with pytest.raises(InvalidAckToken):
        tokens.verify(foreign, T, A, M)


def test_tokens_of_an_older_key_still_verify_after_rotation() -> None:
    old = AckTokens({1: b"k" * 32}, 1)
    token = old.mint(T, A, M, REPLY)
    rotated = AckTokens({1: b"k" * 32, 2: b"n" * 32}, 2)
    assert rotated.verify(token, T, A, M).stream_seq == 48213
    assert rotated.mint(T, A, M, REPLY).startswith("v1.2.")


TOKENS = AckTokens.from_keyring(Keyring.in_memory())
GOOD = TOKENS.mint(T, A, M, REPLY)


def test_the_last_character_of_each_part_cannot_hide_a_change() -> None:
    """Base64url's spare low bits: a non-canonical spelling of the same bytes is refused."""
    head, kid, reply, mac = GOOD.split(".")
    for part in (2, 3):
        pieces = [head, kid, reply, mac]
        last = pieces[part][-1]
        for char in "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_":
            if char != last:
                pieces[part] = pieces[part][:-1] + char
                with pytest.raises(InvalidAckToken):
                    TOKENS.verify(".".join(pieces), T, A, M)


@settings(max_examples=300, deadline=None)
@given(st.integers(0, len(GOOD) - 1), st.characters(codec="ascii"))
def test_any_changed_character_is_refused(position: int, char: str) -> None:
    forged = GOOD[:position] + char + GOOD[position + 1 :]
    if forged == GOOD:
        return
    with pytest.raises(InvalidAckToken):
        TOKENS.verify(forged, T, A, M)


@pytest.mark.parametrize("junk", [None, 7, "", "v1", "v1.x.y.z", "v2.1.a.b", "v1.1.!!.??"])
def test_junk_is_refused(junk: object) -> None:
    with pytest.raises(InvalidAckToken):
        TOKENS.verify(junk, T, A, M)
