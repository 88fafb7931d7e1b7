"""Envelope parsing and attribute checks: steps 1 and 2 of 04-API-SPEC §4.1, and the signature.

``parse_body`` takes the raw request (media type AB-2017, UTF-8 JSON object without duplicate
keys or non-finite numbers, AB-2001). ``check_attributes`` applies conventions §3.1: the closed
attribute set (AB-2004), presence (AB-2002), no nulls and the form of each (AB-2003),
``specversion`` (AB-2005), the message id (AB-2008..2010). ``verify_signature`` checks Ed25519
over ``canonical_json`` of the envelope without ``signature`` (conventions §5.2, AB-2011).
"""

from __future__ import annotations

import json
import re
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from platformkit.boundedjson import nesting_depth
from platformkit.storable import unstorable_reason
from wirekit import canonical_json_parsed

from agentbus.gateway.domain import ed25519
from agentbus.gateway.domain import errors as e
from agentbus.gateway.domain.wire import ID_AHEAD, b64url_decode, format_ts, parse_ts, uuid7_time
from agentbus.ids import InvalidId, parse_id

SEND_BODY_MAX = 327680
BATCH_MAX = 100
BATCH_BODY_MAX = 4 * 1024 * 1024
MAX_DEPTH = 64
"""How deeply a send or batch body may nest objects and arrays (an envelope's ``data`` sits at
level 2, a batch's at 4), measured before the parser runs."""
MEDIA_TYPES = ("application/cloudevents+json", "application/json")
REQUIRED = (
    "specversion", "id", "source", "type", "time", "datacontenttype", "dataschema", "recipient",
    "conversation", "priority", "traceparent", "keyid", "signature", "data",
)  # fmt: skip
OPTIONAL = ("subject", "replyto", "correlation", "idempotencykey", "capability", "capabilityver",
            "expires")  # fmt: skip
AHEAD, BEHIND = ID_AHEAD, timedelta(days=6)
_TYPE = re.compile(r"^agentbus\.[a-z]+(\.[a-z]+)*\.v[1-9][0-9]*$")
_TRACEPARENT = re.compile(r"^00-([0-9a-f]{32})-([0-9a-f]{16})-[0-9a-f]{2}$")
TRACE_HEADER = "AgentBus-Trace-Id"


def trace_of(traceparent: str | None) -> str | None:
    """The trace id of a W3C ``traceparent`` (version 00, ids not all zeros), else None."""
    found = _TRACEPARENT.match(traceparent or "")
    if found is None or set(found.group(1)) == {"0"} or set(found.group(2)) == {"0"}:
        return None
    return found.group(1)


_IDEMPOTENCY = re.compile(r"^[\x21-\x7e]{1,200}$")
_CAPABILITY = re.compile(r"^[a-z][a-z0-9-]*(\.[a-z][a-z0-9-]*){0,7}$")
_CAPABILITY_VER = re.compile(r"^[1-9][0-9]{0,5}$")


@dataclass(frozen=True)
class Parsed:
    """An envelope whose attributes are well formed; ``raw`` is exactly what was signed."""

    raw: dict[str, Any]
    msg_id: uuid.UUID
    conversation_id: uuid.UUID
    key_id: uuid.UUID
    signature: bytes
    correlation_id: uuid.UUID | None
    subject_id: uuid.UUID | None
    expires_at: datetime | None

    def get(self, name: str) -> Any:
        return self.raw.get(name)

    @property
    def type(self) -> str:
        return str(self.raw["type"])

    @property
    def trace_headers(self) -> dict[str, str]:
        """``AgentBus-Trace-Id``: the trace of the envelope's ``traceparent`` (04 §1.1)."""
        return {TRACE_HEADER: str(self.raw["traceparent"]).split("-")[1]}

    @property
    def data(self) -> dict[str, Any]:
        data: dict[str, Any] = self.raw["data"]
        return data


def read_json(text: str) -> tuple[Any, str | None]:
    """``text`` parsed, and the first thing in it that the send path refuses though JSON
    parsers take it: a duplicate key or a non-finite number (None when there is none; the
    later key wins, as ``json.loads`` has it). ValueError when ``text`` is not JSON. Bound its
    nesting first (``MAX_DEPTH``)."""
    flaws: list[str] = []

    def no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        obj: dict[str, Any] = {}
        for key, value in pairs:
            if key in obj and not flaws:
                flaws.append(f"duplicate key {key!r}")
            obj[key] = value
        return obj

    def no_constant(name: str) -> float:
        if not flaws:
            flaws.append(f"{name} is not JSON")
        return float(name)

    value = json.loads(text, object_pairs_hook=no_duplicates, parse_constant=no_constant)
    return value, (flaws[0] if flaws else None)


def refuse_flaw(flaw: str | None) -> None:
    """AB-2001 for a body in which ``read_json`` found a flaw."""
    if flaw is not None:
        raise _malformed(flaw)


def _load(raw: bytes, content_type: str | None, media_types: tuple[str, ...]) -> Any:
    media = (content_type or "").split(";", 1)[0].strip().lower()
    if media not in media_types:
        raise e.ContentTypeUnsupported(f"send {media_types[0]}")
    # Counting brackets is cheap; only a body with more of them than the bound is measured.
    if (
        raw.count(b"{") + raw.count(b"[") > MAX_DEPTH
        and nesting_depth(raw, limit=MAX_DEPTH) > MAX_DEPTH
    ):
        raise e.EnvelopeMalformed(f"the body nests deeper than {MAX_DEPTH} levels")
    try:
        value, flaw = read_json(raw.decode("utf-8"))
    except (ValueError, UnicodeError) as exc:
        raise _malformed(exc) from None
    refuse_flaw(flaw)
    return value


def _malformed(reason: object) -> e.EnvelopeMalformed:
    return e.EnvelopeMalformed(f"the body is not valid JSON for envelopes: {reason}")


def _canonical_size(value: Any) -> int:
    """The length of ``value``'s canonical encoding; lone surrogates and other non-text fail
    here (AB-2001), not at signing."""
    try:
        return len(canonical_json_parsed(value))
    except (ValueError, UnicodeError, TypeError) as exc:
        raise _malformed(exc) from None


def parse_body(raw: bytes, content_type: str | None) -> dict[str, Any]:
    body = _load(raw, content_type, MEDIA_TYPES)
    _canonical_size(body)
    return check_object(body)


def check_object(envelope: Any) -> dict[str, Any]:
    """An envelope is a JSON object (AB-2001)."""
    if not isinstance(envelope, dict):
        raise e.EnvelopeMalformed("the envelope is a JSON object")
    return envelope


BatchItems = list[tuple[Any, int | e.EnvelopeMalformed]]


def parse_batch_body(raw: bytes, content_type: str | None) -> BatchItems:
    """A body that is not JSON, nests past ``MAX_DEPTH``, or holds a duplicate key or a
    non-finite number anywhere fails the whole request (AB-2001): no item can be told apart.
    Then ``batch_items``."""
    return batch_items(_load(raw, content_type, ("application/json",)))


def batch_items(body: Any) -> BatchItems:
    """``{"envelopes": [...]}`` with 1 to ``BATCH_MAX`` items (AB-2001, AB-5009): each item
    with the length of its canonical encoding, or the refusal of an item that has none (a lone
    surrogate: AB-2001), still to be checked one by one (an item that is not an envelope fails
    alone)."""
    envelopes = body.get("envelopes") if isinstance(body, dict) else None
    if not isinstance(envelopes, list) or not envelopes or set(body) != {"envelopes"}:
        raise e.EnvelopeMalformed('the body is {"envelopes": [one or more envelopes]}')
    if len(envelopes) > BATCH_MAX:
        raise e.BatchTooLarge(f"at most {BATCH_MAX} envelopes per batch", limit=BATCH_MAX)
    return [(envelope, _size_or_refusal(envelope)) for envelope in envelopes]


def _size_or_refusal(envelope: Any) -> int | e.EnvelopeMalformed:
    try:
        return _canonical_size(envelope)
    except e.EnvelopeMalformed as exc:
        return exc


def check_size(size: int) -> None:
    """An envelope in a batch obeys the single send's body cap, counted canonically
    (AB-5002)."""
    if size > SEND_BODY_MAX:
        raise e.RequestTooLarge(
            f"an envelope is at most {SEND_BODY_MAX} bytes", limit=SEND_BODY_MAX
        )


def _bad(name: str, reason: str) -> e.AttributeInvalid:
    return e.AttributeInvalid(
        f"{name}: {reason}", errors=[{"pointer": f"/{name}", "reason": reason}]
    )


def _id(env: dict[str, Any], name: str, prefix: str, *, v7: bool = False) -> uuid.UUID | None:
    if name not in env:
        return None
    try:
        return parse_id(prefix, env[name], require_v7=v7)
    except InvalidId as exc:
        raise _bad(name, f"not a {prefix}_ id") from exc


def _match(env: dict[str, Any], name: str, pattern: re.Pattern[str], max_len: int = 500) -> None:
    value = env.get(name)
    if name in env and (
        not isinstance(value, str) or len(value) > max_len or not pattern.match(value)
    ):
        raise _bad(name, "malformed")


def check_attributes(env: dict[str, Any], now: datetime) -> Parsed:
    unknown = sorted(set(env) - set(REQUIRED) - set(OPTIONAL))
    if unknown:
        raise e.AttributeUnknown(f"unknown attributes: {', '.join(unknown)}", attributes=unknown)
    missing = [name for name in REQUIRED if name not in env]
    if missing:
        raise e.AttributeMissing(f"missing attributes: {', '.join(missing)}", attributes=missing)
    for name, value in env.items():
        if value is None or (name != "data" and not isinstance(value, str)):
            raise _bad(name, "must be a string" if value is not None else "may not be null")
        if name != "data" and (reason := unstorable_reason(value)) is not None:
            raise _bad(name, reason)
    if env["specversion"] != "1.0":
        raise e.SpecversionUnsupported("specversion must be 1.0")
    try:
        msg_id = parse_id("msg", env["id"], require_v7=True)
    except InvalidId as exc:
        raise e.MessageIdInvalid("id must be a msg_ UUIDv7") from exc
    id_time = uuid7_time(msg_id)
    if id_time > now + AHEAD:
        raise e.MessageIdInFuture("the id's time is more than 5 minutes ahead")
    if id_time < now - BEHIND:
        raise e.MessageIdStale("the id's time is more than 6 days old")
    if env["time"] != format_ts(id_time):
        raise _bad("time", "must equal the id's time")
    if env["datacontenttype"] != "application/json":
        raise e.ContentTypeUnsupported("datacontenttype must be application/json")
    _match(env, "type", _TYPE, 100)
    if env["priority"] not in ("low", "normal", "high"):
        raise _bad("priority", "is low, normal or high")
    if not isinstance(env["traceparent"], str) or trace_of(env["traceparent"]) is None:
        raise _bad("traceparent", "malformed W3C trace context")
    _match(env, "idempotencykey", _IDEMPOTENCY, 200)
    _match(env, "capability", _CAPABILITY, 100)
    _match(env, "capabilityver", _CAPABILITY_VER)
    expires_at = None
    if "expires" in env:
        try:
            expires_at = parse_ts(env["expires"])
        except ValueError as exc:
            raise _bad("expires", str(exc)) from None
    signature = env["signature"]
    try:
        sig = b64url_decode(signature)
    except ValueError:
        sig = b""
    if len(signature) != 86 or len(sig) != 64:
        raise _bad("signature", "86 base64url characters")
    if not isinstance(env["data"], dict):
        raise _bad("data", "must be a JSON object")
    conversation = _id(env, "conversation", "cnv", v7=True)
    key_id = _id(env, "keyid", "key")
    assert conversation is not None
    assert key_id is not None
    return Parsed(
        raw=env,
        msg_id=msg_id,
        conversation_id=conversation,
        key_id=key_id,
        signature=sig,
        correlation_id=_id(env, "correlation", "msg"),
        subject_id=_id(env, "subject", "tsk"),
        expires_at=expires_at,
    )


def signed_bytes(env: dict[str, Any]) -> bytes:
    """The canonical envelope without its signature; ``env`` came from ``json.loads``, so
    it holds JSON types only and the encoding skips the type walk."""
    return canonical_json_parsed({k: v for k, v in env.items() if k != "signature"})


def verify_signature(parsed: Parsed, public_key: bytes) -> None:
    if not ed25519.verify(public_key, parsed.signature, signed_bytes(parsed.raw)):
        raise e.SignatureInvalid(
            f"signature does not verify with key {parsed.raw['keyid']}",
            errors=[{"pointer": "/signature", "reason": "does not verify"}],
        )
