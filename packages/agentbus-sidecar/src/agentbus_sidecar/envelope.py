"""Envelopes: CloudEvents 1.0 with the agentbus attributes, signed with the agent key.

Conventions §3 fixes the attributes, §5 the signed bytes: ``canonical_json`` of the envelope
without its ``signature`` member, signed with Ed25519 and written base64url without padding.
The builder checks locally what the gateway would refuse anyway, so a queued message does not
sit in the outbox only to fail for good once the gateway is reachable.
"""

from __future__ import annotations

import re
import secrets
from datetime import datetime
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from wirekit.canonical import canonical_json

from agentbus_sidecar.addresses import parse_address
from agentbus_sidecar.clock import format_ts
from agentbus_sidecar.errors import EnvelopeError, SignatureInvalid
from agentbus_sidecar.ids import id_time, new_id, parse_id, request_msg_id_for, task_id_for
from agentbus_sidecar.keys import b64url_decode, b64url_encode

__all__ = [
    "MESSAGE",
    "TASK_REQUEST",
    "TASK_VERBS",
    "build_envelope",
    "new_traceparent",
    "sign_envelope",
    "signed_bytes",
    "trace_id_of",
    "verify_envelope",
]

MESSAGE = "agentbus.message.v1"
TASK_REQUEST = "agentbus.task.request.v1"
TASK_VERBS = ("accept", "reject", "progress", "complete", "fail", "cancel")
SCHEMA_BASE = "https://agentbus.exchange/schemas/"
MAX_PAYLOAD = 262144
_MAX_INT = 2**53 - 1
_TRACEPARENT = re.compile(r"^00-([0-9a-f]{32})-([0-9a-f]{16})-[0-9a-f]{2}$")
_IDEMPOTENCY_KEY = re.compile(r"^[\x21-\x7e]{1,200}$")
_CAPABILITY = re.compile(r"^[a-z][a-z0-9-]*(\.[a-z][a-z0-9-]*){0,7}$")
_CAPABILITY_VER = re.compile(r"^[1-9][0-9]{0,5}$")


def new_traceparent(trace_id: str | None = None) -> str:
    """A W3C traceparent with a fresh span; pass ``trace_id`` to continue a trace."""
    trace = trace_id or secrets.token_hex(16)
    span = secrets.token_hex(8)
    if not _TRACEPARENT.match(f"00-{trace}-{span}-01") or set(trace) == {"0"}:
        raise EnvelopeError(f"trace id {trace!r} is not 32 lowercase hex digits, not all zero")
    return f"00-{trace}-{span}-01"


def trace_id_of(envelope: dict[str, Any]) -> str:
    return str(envelope["traceparent"]).split("-")[1]


def _check_numbers(value: Any) -> None:
    if type(value) is int and abs(value) > _MAX_INT:
        raise EnvelopeError(f"integer {value} is outside +-(2^53-1) (AB-2018)")
    if isinstance(value, dict):
        for item in value.values():
            _check_numbers(item)
    elif isinstance(value, list):
        for item in value:
            _check_numbers(item)


def _lifecycle_type(verb: str) -> str:
    return f"agentbus.task.{verb}.v1"


def build_envelope(
    *,
    type: str,
    source: str,
    recipient: str,
    data: dict[str, Any],
    key_id: str,
    conversation: str | None = None,
    subject: str | None = None,
    correlation: str | None = None,
    idempotency_key: str | None = None,
    capability: str | None = None,
    capability_ver: str | None = None,
    priority: str = "normal",
    expires: datetime | None = None,
    replyto: str | None = None,
    traceparent: str | None = None,
) -> dict[str, Any]:
    """Build an unsigned envelope with a fresh ``msg_`` id (and ``cnv_`` id if none is given)."""
    try:
        parse_address(source)
        parse_address(recipient)
        if replyto is not None:
            parse_address(replyto)
        parse_id(key_id, "key")
        if conversation is not None:
            parse_id(conversation, "cnv", client_minted=True)
        if correlation is not None:
            parse_id(correlation, "msg")
    except ValueError as exc:
        raise EnvelopeError(str(exc)) from exc
    if not isinstance(data, dict):
        raise EnvelopeError("data must be a JSON object")
    _check_numbers(data)
    try:
        size = len(canonical_json(data))
    except (TypeError, ValueError) as exc:
        raise EnvelopeError(f"data is not JSON: {exc}") from exc
    if size > MAX_PAYLOAD:
        raise EnvelopeError(f"data is {size} bytes canonical, over {MAX_PAYLOAD} (AB-5001)")
    if priority not in ("low", "normal", "high"):
        raise EnvelopeError(f"priority {priority!r} is not low, normal or high")
    if traceparent is not None and not _TRACEPARENT.match(traceparent):
        raise EnvelopeError(f"traceparent {traceparent!r} is malformed")
    if idempotency_key is not None and not _IDEMPOTENCY_KEY.match(idempotency_key):
        raise EnvelopeError("idempotency key must be 1-200 printable ASCII characters")
    if capability is not None and (len(capability) > 100 or not _CAPABILITY.match(capability)):
        raise EnvelopeError(f"capability {capability!r} is malformed")
    if capability_ver is not None and not _CAPABILITY_VER.match(capability_ver):
        raise EnvelopeError(f"capability version {capability_ver!r} is malformed")

    msg_id = new_id("msg")
    if type == TASK_REQUEST:
        if capability is None:
            raise EnvelopeError("a task request needs a capability")
        # Without a caller's key the message id serves: resends of this envelope still dedupe.
        idempotency_key = idempotency_key or msg_id
        subject = task_id_for(msg_id)
    elif type in {_lifecycle_type(verb) for verb in TASK_VERBS}:
        if subject is None:
            raise EnvelopeError(f"{type} needs the task id as subject")
        try:
            request_id = request_msg_id_for(subject)
        except ValueError as exc:
            raise EnvelopeError(str(exc)) from exc
        if correlation not in (None, request_id):
            raise EnvelopeError("a task lifecycle message correlates with the task's request")
        correlation = request_id
        if capability is not None:
            raise EnvelopeError(f"{type} carries no capability")
    elif type == MESSAGE:
        if subject is not None:
            raise EnvelopeError(f"{type} has no subject")
    else:
        raise EnvelopeError(f"unknown envelope type {type!r}")

    envelope: dict[str, Any] = {
        "specversion": "1.0",
        "id": msg_id,
        "source": source,
        "type": type,
        "time": format_ts(id_time(msg_id)),
        "datacontenttype": "application/json",
        "dataschema": f"{SCHEMA_BASE}{type}.json",
        "recipient": recipient,
        "conversation": conversation or new_id("cnv"),
        "priority": priority,
        "traceparent": traceparent or new_traceparent(),
        "keyid": key_id,
        "data": data,
    }
    optional = {
        "subject": subject,
        "replyto": replyto,
        "correlation": correlation,
        "idempotencykey": idempotency_key,
        "capability": capability,
        "capabilityver": capability_ver,
        "expires": format_ts(expires) if expires is not None else None,
    }
    envelope.update({name: value for name, value in optional.items() if value is not None})
    return envelope


def signed_bytes(envelope: dict[str, Any]) -> bytes:
    """The bytes a signature covers: every member except ``signature``."""
    return canonical_json({k: v for k, v in envelope.items() if k != "signature"})


def sign_envelope(envelope: dict[str, Any], key: Ed25519PrivateKey) -> dict[str, Any]:
    """Return a copy of ``envelope`` with its ``signature`` attribute set."""
    signature = b64url_encode(key.sign(signed_bytes(envelope)))
    return {**envelope, "signature": signature}


def verify_envelope(envelope: dict[str, Any], public_key: Ed25519PublicKey) -> None:
    """Raise SignatureInvalid unless the sender's key signed exactly this envelope."""
    signature = envelope.get("signature")
    if not isinstance(signature, str) or len(signature) != 86:
        raise SignatureInvalid("signature missing or not 86 base64url characters")
    try:
        public_key.verify(b64url_decode(signature), signed_bytes(envelope))
    except (InvalidSignature, ValueError, TypeError) as exc:
        raise SignatureInvalid(f"signature of {envelope.get('id')} does not verify") from exc
