from __future__ import annotations

import json
import re
from typing import Any

import pytest
from agentbus_sidecar.clock import format_ts
from agentbus_sidecar.envelope import (
    MESSAGE,
    TASK_REQUEST,
    build_envelope,
    sign_envelope,
    signed_bytes,
    verify_envelope,
)
from agentbus_sidecar.errors import EnvelopeError, SignatureInvalid
from agentbus_sidecar.ids import id_time, new_id, parse_id, task_id_for
from agentbus_sidecar.keys import b64url_decode
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

ME = "agent://acme/platform/planner"
PEER = "agent://acme/platform/reviewer"
KEY_ID = "key_01a12bc393807e6f8a9b0c1d2e3f4a5b"


def _build(**attrs: Any) -> dict[str, Any]:
    attrs.setdefault("type", MESSAGE)
    attrs.setdefault("data", {"text": "hello"})
    return build_envelope(source=ME, recipient=PEER, key_id=KEY_ID, **attrs)


def test_a_message_carries_every_required_attribute() -> None:
    env = _build(data={"text": "héllo ✓", "title": "Hi"})
    assert set(env) == {
        "specversion", "id", "source", "type", "time", "datacontenttype", "dataschema",
        "recipient", "conversation", "priority", "traceparent", "keyid", "data",
    }  # fmt: skip
    assert env["specversion"] == "1.0"
    assert env["dataschema"] == "https://agentbus.exchange/schemas/agentbus.message.v1.json"
    assert env["time"] == format_ts(id_time(env["id"]))
    assert re.match(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$", env["time"])
    assert parse_id(env["conversation"], "cnv", client_minted=True)
    assert re.match(r"^00-[0-9a-f]{32}-[0-9a-f]{16}-01$", env["traceparent"])
    assert env["priority"] == "normal"


def test_a_task_request_names_its_task_and_is_idempotent_by_default() -> None:
    env = _build(type=TASK_REQUEST, data={"instructions": "review"}, capability="code.review")
    assert env["subject"] == task_id_for(env["id"])
    assert env["idempotencykey"] == env["id"]
    assert _build(type=TASK_REQUEST, data={"instructions": "x"}, capability="code.review",
                  idempotency_key="pr-4411")["idempotencykey"] == "pr-4411"  # fmt: skip
    with pytest.raises(EnvelopeError, match="capability"):
        _build(type=TASK_REQUEST, data={"instructions": "review"})


def test_lifecycle_messages_correlate_with_the_request() -> None:
    request = new_id("msg")
    env = _build(type="agentbus.task.accept.v1", data={}, subject=task_id_for(request))
    assert env["correlation"] == request
    with pytest.raises(EnvelopeError, match="subject"):
        _build(type="agentbus.task.complete.v1", data={"summary": "done"})
    with pytest.raises(EnvelopeError, match="correlates"):
        _build(type="agentbus.task.fail.v1", data={}, subject=task_id_for(request),
               correlation=new_id("msg"))  # fmt: skip


@pytest.mark.parametrize(
    ("attrs", "message"),
    [
        ({"recipient": "agent://Acme/platform/reviewer"}, "address"),
        ({"recipient": "topic://acme/platform/news"}, "address"),
        ({"type": "agentbus.unknown.v1"}, "unknown envelope type"),
        ({"data": {"n": 2**53}}, "AB-2018"),
        ({"data": {"text": "x" * 262145}}, "AB-5001"),
        ({"priority": "urgent"}, "priority"),
        ({"idempotency_key": "has space"}, "idempotency"),
        ({"conversation": "cnv_" + "0" * 32}, "UUIDv7"),
        ({"subject": "tsk_" + "0" * 32}, "no subject"),
    ],
)
def test_invalid_envelopes_are_refused_before_queueing(attrs: dict[str, Any], message: str) -> None:
    recipient = attrs.pop("recipient", PEER)
    attrs.setdefault("type", MESSAGE)
    attrs.setdefault("data", {"text": "hello"})
    with pytest.raises(EnvelopeError, match=message):
        build_envelope(source=ME, recipient=recipient, key_id=KEY_ID, **attrs)


def test_signature_covers_the_canonical_envelope_without_itself() -> None:
    key = Ed25519PrivateKey.generate()
    env = sign_envelope(_build(data={"text": "ünïcode", "n": 1.5, "list": [3, 1]}), key)
    assert len(env["signature"]) == 86
    assert "=" not in env["signature"]
    # An independent encoder following conventions §5.1 gives the same bytes.
    rest = {k: v for k, v in env.items() if k != "signature"}
    independent = json.dumps(rest, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    assert signed_bytes(env) == independent.encode()
    key.public_key().verify(b64url_decode(env["signature"]), independent.encode())
    assert sign_envelope(rest, key)["signature"] == env["signature"]  # Ed25519 is deterministic
    verify_envelope(dict(reversed(list(env.items()))), key.public_key())  # member order is free


def _flip(text: str, index: int) -> str:
    return text[:index] + ("B" if text[index] == "A" else "A") + text[index + 1 :]


@pytest.mark.parametrize(
    "tamper",
    [
        lambda e: e["data"].update(text="changed"),
        lambda e: e.update(recipient="agent://acme/platform/mallory"),
        lambda e: e.update(time="2026-01-01T00:00:00.000Z"),
        lambda e: e.pop("conversation"),
        lambda e: e.update(extra="x"),
        lambda e: e.update(signature=_flip(e["signature"], 10)),
        lambda e: e.update(signature="short"),
        lambda e: e.pop("signature"),
    ],
)
def test_any_change_breaks_the_signature(tamper: Any) -> None:
    key = Ed25519PrivateKey.generate()
    env = sign_envelope(_build(), key)
    verify_envelope(env, key.public_key())
    forged = json.loads(json.dumps(env))
    tamper(forged)
    with pytest.raises(SignatureInvalid):
        verify_envelope(forged, key.public_key())


def test_another_key_does_not_verify() -> None:
    env = sign_envelope(_build(), Ed25519PrivateKey.generate())
    with pytest.raises(SignatureInvalid):
        verify_envelope(env, Ed25519PrivateKey.generate().public_key())
