"""Frames of wire protocol v2 and the checks every receiver applies to signed ones.

A frame is one JSON object with ``v`` (2), ``type``, ``id`` (<= 64 chars), ``ts`` (ISO 8601
UTC) and ``payload``. Every frame except ``hello`` and ``hello_ack`` is signed: it also carries
``nonce`` (16 random bytes, urlsafe base64), ``seq`` (strictly increasing per direction of a
session) and ``hmac``, the hex HMAC-SHA256 under the project secret of the canonical JSON of the
frame without ``hmac`` plus the session binding ``agent_id``, ``project_id`` and ``session_id``.
The binding fields are not sent; each side adds the values it knows, so a frame from another
session, agent or project fails its signature.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import re
import secrets
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from wirekit.canonical import canonical_json, canonical_json_parsed

PROTOCOL_VERSION = 2
SKEW_SECONDS = 60
NONCE_MEMORY_SECONDS = 180
MAX_BATCH_EVENTS = 5000
# ``hello`` and ``heartbeat`` may carry ``active_tasks``: the engine task ids the worker runs at
# that moment, all of them (an agent with more sends none rather than a part). Absent means the
# agent does not say; the brain then cannot find a lost task again before its next event.
MAX_ACTIVE_TASKS = 10_000
MAX_FRAME_BYTES = 1024 * 1024
MAX_ID_LENGTH = 64
MAX_NONCE_LENGTH = 32
# A string from ``json.loads`` holds surrogates only where a ``\\u`` escape left one unpaired.
LONE_SURROGATE = re.compile("[\ud800-\udfff]")

SIGNED_TYPES = frozenset(
    {
        "event_batch",
        "event_batch_ack",
        "heartbeat",
        "agent_status",
        "registry_delta",
        "command",
        "command_ack",
        "command_result",
        "error",
    }
)

# WebSocket close codes of the protocol.
CLOSE_BAD_TOKEN = 4401
CLOSE_BAD_SIGNATURE = 4403
CLOSE_BAD_HELLO = 4400
CLOSE_UNSUPPORTED_PROTOCOL = 4426
CLOSE_RATE_LIMITED = 4429
CLOSE_REPLACED = 4002
CLOSE_REVOKED = 4003


class FrameError(Exception):
    """A frame was malformed or failed a security check; ``close_code`` says how to close."""

    def __init__(self, reason: str, close_code: int = CLOSE_BAD_SIGNATURE) -> None:
        super().__init__(reason)
        self.reason = reason
        self.close_code = close_code


def new_frame_id() -> str:
    return secrets.token_hex(16)


def format_ts(moment: datetime | None = None) -> str:
    moment = moment or datetime.now(UTC)
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")


def parse_ts(value: str) -> datetime:
    parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    if parsed.tzinfo is None:
        raise ValueError("timestamp has no time zone")
    return parsed


def encode_secret(secret: bytes) -> str:
    """The printable form of a project secret, as operators paste it into Z4J_HMAC_SECRET."""
    return base64.urlsafe_b64encode(secret).decode().rstrip("=")


def decode_secret(value: str) -> bytes:
    text = value.strip()
    alphabet = set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_=")
    if not text or set(text) - alphabet:
        raise ValueError("the HMAC secret must be the urlsafe-base64 value the brain showed")
    raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    if len(raw) < 32:
        raise ValueError("the HMAC secret must decode to at least 32 bytes")
    return raw


def unsigned_frame(
    frame_type: str, payload: dict[str, Any], frame_id: str | None = None
) -> dict[str, Any]:
    return {
        "v": PROTOCOL_VERSION,
        "type": frame_type,
        "id": frame_id or new_frame_id(),
        "ts": format_ts(),
        "payload": payload,
    }


@dataclass(frozen=True)
class Session:
    """What binds a session's signatures: its secret and the ids fixed by ``hello_ack``."""

    secret: bytes = field(repr=False)
    agent_id: str
    project_id: str
    session_id: str

    def mac(self, frame: dict[str, Any], *, encode: Callable[[Any], bytes] = canonical_json) -> str:
        """The frame's HMAC over ``encode`` of its envelope (canonical JSON by default; see
        wirekit's ``canonical_json_parsed`` for frames that came from ``json.loads``)."""
        return hmac.new(self.secret, encode(self._envelope(frame)), hashlib.sha256).hexdigest()

    def mac_around(self, frame: dict[str, Any], payload: bytes) -> str:
        """The HMAC of ``frame`` with ``payload``, its canonical JSON, in place of its null one."""
        head, tail = _split_at_payload(canonical_json(self._envelope(frame)))
        digest = hmac.new(self.secret, head, hashlib.sha256)
        digest.update(payload)
        digest.update(tail)
        return digest.hexdigest()

    def _envelope(self, frame: dict[str, Any]) -> dict[str, Any]:
        envelope = {k: v for k, v in frame.items() if k != "hmac"}
        envelope["agent_id"] = self.agent_id
        envelope["project_id"] = self.project_id
        envelope["session_id"] = self.session_id
        return envelope


_NULL_PAYLOAD = b'"payload":null'


def _split_at_payload(encoded: bytes) -> tuple[bytes, bytes]:
    # Inside a JSON string every quote is escaped, so the first unescaped '"payload":null' of a
    # canonical encoding is the top-level member.
    at = encoded.index(_NULL_PAYLOAD)
    return encoded[: at + len(_NULL_PAYLOAD) - 4], encoded[at + len(_NULL_PAYLOAD) :]


class FrameSigner:
    """Stamps ``ts``, ``nonce``, ``seq`` and ``hmac`` on outbound frames of one direction."""

    def __init__(self, session: Session, first_seq: int = 1) -> None:
        self.session = session
        self._next_seq = first_seq

    def sign(
        self, frame_type: str, payload: dict[str, Any], frame_id: str | None = None
    ) -> dict[str, Any]:
        frame = unsigned_frame(frame_type, payload, frame_id)
        frame["nonce"] = secrets.token_urlsafe(16)
        frame["seq"] = self._next_seq
        self._next_seq += 1
        frame["hmac"] = self.session.mac(frame)
        return frame

    def sign_encoded(self, frame_type: str, payload: bytes, frame_id: str | None = None) -> bytes:
        """``sign`` for a payload already encoded by ``wirekit.canonical_json``; returns the
        frame as the bytes to send (canonical JSON itself).

        A sender that keeps a payload encoded, such as a batch that may have to be sent again,
        encodes only the small envelope around it for each frame.
        """
        frame: dict[str, Any] = unsigned_frame(frame_type, {}, frame_id)
        frame["payload"] = None
        frame["nonce"] = secrets.token_urlsafe(16)
        frame["seq"] = self._next_seq
        self._next_seq += 1
        frame["hmac"] = self.session.mac_around(frame, payload)
        head, tail = _split_at_payload(canonical_json(frame))
        return head + payload + tail


def _canonical_replacing_surrogates(value: Any) -> bytes:
    text = json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    )
    return LONE_SURROGATE.sub("\ufffd", text).encode("utf-8")


class FrameVerifier:
    """Checks inbound signed frames: shape, signature, clock skew, nonce reuse, sequence.

    ``faster`` may name an encoder that usually gives the canonical bytes of a parsed frame
    more cheaply (the brain uses orjson): its HMAC is tried first, and the canonical encoding
    decides whenever it does not match or cannot encode. A match either way means the key's
    holder signed a JSON text of this very frame.
    """

    def __init__(
        self,
        session: Session,
        *,
        clock: Any = time.time,
        faster: Callable[[Any], bytes] | None = None,
    ) -> None:
        self.session = session
        self._clock = clock
        self._faster = faster
        self._last_seq = 0
        self._nonces: OrderedDict[str, float] = OrderedDict()

    def verify(self, frame: Any) -> dict[str, Any]:
        checked = self.authentic(frame)
        self._check_nonce(checked["nonce"])
        seq = checked["seq"]
        if seq <= self._last_seq:
            raise FrameError(f"sequence went backwards ({seq} after {self._last_seq})")
        self._last_seq = seq
        return checked

    def authentic(self, frame: Any) -> dict[str, Any]:
        """Every check but the replay memory (nonce reuse, sequence): the frame's shape, its
        signature and its clock skew. A receiver that keeps the replay state elsewhere (the
        brain's long-poll sessions, shared by its replicas) applies the rest itself."""
        if not isinstance(frame, dict):
            raise FrameError("a frame is a JSON object", CLOSE_BAD_HELLO)
        if frame.get("v") != PROTOCOL_VERSION:
            raise FrameError(
                f"unsupported protocol version {frame.get('v')!r}", CLOSE_UNSUPPORTED_PROTOCOL
            )
        frame_type = frame.get("type")
        if frame_type not in SIGNED_TYPES:
            raise FrameError(f"unexpected frame type {frame_type!r}", CLOSE_BAD_HELLO)
        frame_id, nonce, seq, mac = (frame.get(k) for k in ("id", "nonce", "seq", "hmac"))
        if not isinstance(frame_id, str) or not 0 < len(frame_id) <= MAX_ID_LENGTH:
            raise FrameError("frame id missing or too long", CLOSE_BAD_HELLO)
        if not isinstance(frame.get("payload"), dict):
            raise FrameError("frame payload must be an object", CLOSE_BAD_HELLO)
        if not isinstance(mac, str) or not isinstance(nonce, str) or not isinstance(seq, int):
            raise FrameError("signed frame lacks nonce, seq or hmac")
        # The signature first, so an unauthenticated peer learns nothing about replay state.
        if not self._signed(frame, mac):
            raise FrameError("bad frame signature")
        self._check_fresh(frame.get("ts"))
        if not 0 < len(nonce) <= MAX_NONCE_LENGTH:
            raise FrameError("bad nonce")
        return frame

    def _signed(self, frame: dict[str, Any], mac: str) -> bool:
        if self._faster is not None:
            try:
                if hmac.compare_digest(self.session.mac(frame, encode=self._faster), mac):
                    return True
            except (TypeError, ValueError):
                pass
        try:
            try:
                expected = self.session.mac(frame, encode=canonical_json_parsed)
            except UnicodeEncodeError:
                # A lone surrogate has no UTF-8 form: a signer encodes it as U+FFFD, as the
                # encoders of JavaScript and Go do, and so is the text checked here.
                expected = self.session.mac(frame, encode=_canonical_replacing_surrogates)
        except (TypeError, ValueError) as exc:
            raise FrameError(f"frame is not canonical JSON: {exc}", CLOSE_BAD_HELLO) from exc
        return hmac.compare_digest(expected, mac)

    def _check_fresh(self, ts: Any) -> None:
        try:
            sent = parse_ts(ts).timestamp()
        except (TypeError, ValueError, AttributeError) as exc:
            raise FrameError("bad frame timestamp") from exc
        if abs(self._clock() - sent) > SKEW_SECONDS:
            raise FrameError("frame timestamp outside the allowed clock skew")

    def _check_nonce(self, nonce: str) -> None:
        now = self._clock()
        while self._nonces:
            oldest, seen = next(iter(self._nonces.items()))
            if now - seen <= NONCE_MEMORY_SECONDS:
                break
            del self._nonces[oldest]
        if nonce in self._nonces:
            raise FrameError("nonce reused")
        self._nonces[nonce] = now
