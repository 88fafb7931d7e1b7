"""Wire protocol v2 frames: signing, verification and every check FrameVerifier makes."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from wirekit import canonical_json
from z4j_agent.protocol import (
    CLOSE_BAD_HELLO,
    CLOSE_BAD_SIGNATURE,
    CLOSE_UNSUPPORTED_PROTOCOL,
    NONCE_MEMORY_SECONDS,
    FrameError,
    FrameSigner,
    FrameVerifier,
    Session,
    decode_secret,
    encode_secret,
    format_ts,
    unsigned_frame,
)

SECRET = os.urandom(32)


def session(**changes: Any) -> Session:
    fields = {
        "secret": SECRET,
        "agent_id": "agent-1",
        "project_id": "proj-1",
        "session_id": "sess-1",
    } | changes
    return Session(**fields)


class Clock:
    def __init__(self) -> None:
        self.now = datetime.now(UTC).timestamp()

    def __call__(self) -> float:
        return self.now


def test_round_trip() -> None:
    signer, verifier = FrameSigner(session()), FrameVerifier(session())
    for n in range(3):
        frame = signer.sign("event_batch", {"events": [{"n": n}]})
        assert verifier.verify(frame) is frame
        assert frame["seq"] == n + 1


def test_a_pre_encoded_payload_signs_the_same_frame() -> None:
    signer, verifier = FrameSigner(session()), FrameVerifier(session())
    payload = {"events": [{"x": '"payload":null', "y": "é"}, {"payload": None}]}
    for n in range(3):
        wire = signer.sign_encoded("event_batch", canonical_json(payload), frame_id=f"f{n}")
        frame = verifier.verify(json.loads(wire))
        assert frame["payload"] == payload
        assert (frame["id"], frame["seq"]) == (f"f{n}", n + 1)
        assert wire == canonical_json(frame)
    assert verifier.verify(signer.sign("heartbeat", {}))["seq"] == 4


def test_a_pre_encoded_payload_is_bound_to_its_bytes() -> None:
    wire = FrameSigner(session()).sign_encoded("event_batch", canonical_json({"events": [1]}))
    frame = json.loads(wire)
    frame["payload"] = {"events": [2]}
    with pytest.raises(FrameError, match="signature"):
        FrameVerifier(session()).verify(frame)


def test_session_secret_is_not_in_its_repr() -> None:
    assert SECRET.hex() not in repr(session())
    assert repr(SECRET) not in repr(session())


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("payload", {"events": []}),
        ("type", "heartbeat"),
        ("seq", 99),
        ("ts", format_ts()),
        ("id", "other"),
        ("nonce", "AAAA"),
    ],
    ids=["payload", "type", "seq", "ts", "id", "nonce"],
)
def test_tampering_breaks_the_signature(field: str, value: Any) -> None:
    frame = FrameSigner(session()).sign("event_batch", {"events": [{"n": 1}]})
    frame[field] = value
    with pytest.raises(FrameError) as err:
        FrameVerifier(session()).verify(frame)
    assert err.value.close_code == CLOSE_BAD_SIGNATURE


@pytest.mark.parametrize(
    "other",
    [
        {"agent_id": "agent-2"},
        {"project_id": "proj-2"},
        {"session_id": "sess-2"},
        {"secret": os.urandom(32)},
    ],
)
def test_session_binding(other: dict[str, Any]) -> None:
    frame = FrameSigner(session()).sign("heartbeat", {})
    with pytest.raises(FrameError, match="signature"):
        FrameVerifier(session(**other)).verify(frame)


def test_replay_is_rejected() -> None:
    signer, verifier = FrameSigner(session()), FrameVerifier(session())
    frame = signer.sign("heartbeat", {})
    verifier.verify(frame)
    with pytest.raises(FrameError, match="nonce reused"):
        verifier.verify(frame)


def test_sequence_must_increase() -> None:
    signer, verifier = FrameSigner(session(), first_seq=10), FrameVerifier(session())
    later, earlier = signer.sign("heartbeat", {}), FrameSigner(session(), 5).sign("heartbeat", {})
    verifier.verify(later)
    with pytest.raises(FrameError, match="sequence went backwards"):
        verifier.verify(earlier)


def test_clock_skew_window() -> None:
    clock = Clock()
    verifier = FrameVerifier(session(), clock=clock)
    frame = FrameSigner(session()).sign("heartbeat", {})
    clock.now += 61
    with pytest.raises(FrameError, match="clock skew"):
        verifier.verify(frame)
    clock.now -= 2
    verifier.verify(frame)


def test_nonces_are_forgotten_after_their_window() -> None:
    clock = Clock()
    verifier = FrameVerifier(session(), clock=clock)
    signer = FrameSigner(session())
    verifier.verify(signer.sign("heartbeat", {}))
    clock.now += NONCE_MEMORY_SECONDS + 1
    assert verifier._nonces  # still remembered until the next check prunes it
    frame = signer.sign("heartbeat", {})
    frame["ts"] = format_ts(datetime.fromtimestamp(clock.now, UTC))
    frame["hmac"] = session().mac(frame)
    verifier.verify(frame)
    assert len(verifier._nonces) == 1


@pytest.mark.parametrize(
    ("frame", "code"),
    [
        ("not a dict", CLOSE_BAD_HELLO),
        ({"v": 1, "type": "heartbeat"}, CLOSE_UNSUPPORTED_PROTOCOL),
        ({"v": 2, "type": "hello"}, CLOSE_BAD_HELLO),
        ({"v": 2, "type": "heartbeat", "id": "x" * 65, "payload": {}}, CLOSE_BAD_HELLO),
        ({"v": 2, "type": "heartbeat", "id": "x", "payload": []}, CLOSE_BAD_HELLO),
        ({"v": 2, "type": "heartbeat", "id": "x", "payload": {}}, CLOSE_BAD_SIGNATURE),
    ],
)
def test_malformed_frames(frame: Any, code: int) -> None:
    with pytest.raises(FrameError) as err:
        FrameVerifier(session()).verify(frame)
    assert err.value.close_code == code


def test_non_json_payload_is_a_bad_frame() -> None:
    frame = FrameSigner(session()).sign("heartbeat", {})
    frame["payload"] = {"x": float("nan")}
    with pytest.raises(FrameError) as err:
        FrameVerifier(session()).verify(frame)
    assert err.value.close_code == CLOSE_BAD_HELLO


def test_stale_timestamp_from_the_past() -> None:
    frame = FrameSigner(session()).sign("heartbeat", {})
    frame["ts"] = format_ts(datetime.now(UTC) - timedelta(minutes=5))
    frame["hmac"] = session().mac(frame)
    with pytest.raises(FrameError, match="clock skew"):
        FrameVerifier(session()).verify(frame)


def test_unsigned_frames_and_secrets() -> None:
    hello = unsigned_frame("hello", {"protocol_version": "2"})
    assert set(hello) == {"v", "type", "id", "ts", "payload"}
    assert decode_secret(encode_secret(SECRET)) == SECRET
    for bad in ("", "not base64!", encode_secret(b"short")):
        with pytest.raises(ValueError, match="HMAC secret"):
            decode_secret(bad)


def test_a_faster_encoder_is_tried_first_and_the_canonical_one_decides() -> None:
    calls: list[str] = []

    def right(value: Any) -> bytes:
        calls.append("right")
        return canonical_json(value)

    def wrong(value: Any) -> bytes:
        calls.append("wrong")
        return b"{}"

    def refuses(value: Any) -> bytes:
        calls.append("refuses")
        raise TypeError("cannot encode")

    for faster in (right, wrong, refuses):
        signer = FrameSigner(session())
        verifier = FrameVerifier(session(), faster=faster)
        assert verifier.verify(signer.sign("heartbeat", {"n": 1}))["payload"] == {"n": 1}
        forged = signer.sign("heartbeat", {"n": 2})
        forged["payload"] = {"n": 3}
        with pytest.raises(FrameError, match="signature"):
            verifier.verify(forged)
    assert calls == ["right", "right", "wrong", "wrong", "refuses", "refuses"]
