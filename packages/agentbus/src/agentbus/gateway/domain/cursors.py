"""Page cursors of the list routes: an opaque base64url text holding the route's kind and the
(time, id) of the last row of the page before (``accepted_at`` of messages, ``created_at`` of
agents); a cursor made by another route is
AB-8007 (``CursorInvalid``)."""

from __future__ import annotations

import json
import uuid
from datetime import datetime
from typing import Any

from platformkit import boundedjson

from agentbus.gateway.domain.errors import CursorInvalid
from agentbus.gateway.domain.wire import b64url_decode, b64url_encode

Position = tuple[datetime, uuid.UUID]


def encode(kind: str, at: datetime, row_id: uuid.UUID) -> str:
    return b64url_encode(json.dumps([kind, at.isoformat(), row_id.hex]).encode())


def decode(kind: str, cursor: str | None) -> Position | None:
    if cursor is None:
        return None
    try:
        found, at, hex_id = boundedjson.loads(b64url_decode(cursor), max_depth=1, max_bytes=512)
        if found != kind:
            raise ValueError(found)
        return datetime.fromisoformat(at), uuid.UUID(hex=hex_id)
    except (ValueError, TypeError) as exc:
        raise CursorInvalid("this cursor was not made by this endpoint") from exc


def after_page(
    kind: str, rows: list[dict[str, Any]], limit: int, at: str = "accepted_at"
) -> str | None:
    """The cursor of the page after ``rows`` (``limit`` >= 1), from the last row's ``at``
    column and id; None when they did not fill a page."""
    if len(rows) < limit:
        return None
    return encode(kind, rows[-1][at], rows[-1]["id"])
