"""Agent frames parsed with bounds before anything else looks at them.

A frame is refused (:class:`FrameRefused`) when it is larger than the protocol's maximum frame
size, nested deeper than :data:`MAX_FRAME_DEPTH` or not JSON. The parse also tells whether the
frame may hold something PostgreSQL cannot store (``platformkit.boundedjson.loads_for_storage``),
so only such batches are screened event by event.

A refused frame cannot be verified, but its envelope usually can still be read: both agents put
``id`` and ``type`` outside ``payload`` (sorted keys put ``id`` before it and ``type`` after it),
so :func:`peek_envelope` reads them from the text before the first and after the last nested
value. The brain uses them to answer an ``event_batch`` with an ack the agent acts on.
"""

from __future__ import annotations

import re
from typing import Any

from platformkit.boundedjson import JsonRefused, loads_for_storage
from z4j_agent.protocol import MAX_FRAME_BYTES

# Frame, payload, events, one event and its data take five levels; agents bound the data they
# send well within the rest (the z4j-celery agent at 64 levels, ours at 12).
MAX_FRAME_DEPTH = 128
_PEEK_BYTES = 512
_MEMBER = re.compile(rb'"(id|type)"\s*:\s*"([A-Za-z0-9_.:-]{1,64})"')


class FrameRefused(Exception):
    """A frame that was not parsed; ``frame_type`` and ``frame_id`` as far as they are known."""

    def __init__(self, reason: str, frame_type: str | None, frame_id: str | None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.frame_type = frame_type
        self.frame_id = frame_id


def parse_frame(raw: str | bytes) -> tuple[Any, bool]:
    """The parsed frame and whether it may hold values PostgreSQL cannot store."""
    try:
        return loads_for_storage(raw, max_depth=MAX_FRAME_DEPTH, max_bytes=MAX_FRAME_BYTES)
    except JsonRefused as exc:
        frame_type, frame_id = peek_envelope(raw)
        raise FrameRefused(f"frame {exc.reason}", frame_type, frame_id) from None


def peek_envelope(raw: str | bytes) -> tuple[str | None, str | None]:
    """``type`` and ``id`` of a top-level JSON object, read without parsing it.

    Only the text between the opening brace and the first nested ``{`` or ``[``, and between the
    last nested ``}`` or ``]`` and the closing brace, is read: members found there belong to the
    top-level object whatever the rest holds. Anything else gives None.
    """
    data = raw.encode("utf-8", "surrogatepass") if isinstance(raw, str) else raw
    data = data.strip()
    if not data.startswith(b"{") or not data.endswith(b"}"):
        return None, None
    head = data[1 : 1 + _PEEK_BYTES]
    opener = min((i for i in (head.find(b"{"), head.find(b"[")) if i >= 0), default=len(head))
    tail = data[max(1, len(data) - 1 - _PEEK_BYTES) : -1]
    closer = max(tail.rfind(b"}"), tail.rfind(b"]"))
    found: dict[bytes, str] = {}
    for part in (head[:opener], tail[closer + 1 :] if closer >= 0 else b""):
        for name, value in _MEMBER.findall(part):
            found.setdefault(name, value.decode())
    return found.get(b"type"), found.get(b"id")
