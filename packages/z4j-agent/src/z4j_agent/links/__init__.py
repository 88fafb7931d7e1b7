"""Links to the brain: one WebSocket, or the HTTP fallback, behind the same small interface.

A link carries frames and nothing else: the session logic (signing, acks, heartbeats) lives in
``z4j_agent.shipper`` and is the same for both. ``receive`` returns ``(channel, frame)``: the brain
signs all its frames of a session with one sequence, but over HTTP the replies to posts and the
long-polled commands can arrive in either order, so the receiver checks the sequence per channel.
"""

from __future__ import annotations

from typing import Any, Protocol

from z4j_agent.protocol import (
    CLOSE_BAD_HELLO,
    CLOSE_BAD_SIGNATURE,
    CLOSE_BAD_TOKEN,
    CLOSE_RATE_LIMITED,
    CLOSE_REPLACED,
    CLOSE_REVOKED,
    CLOSE_UNSUPPORTED_PROTOCOL,
)

Frame = dict[str, Any]

# How an HTTP status maps onto the WebSocket close code with the same meaning.
STATUS_TO_CLOSE = {
    400: CLOSE_BAD_HELLO,
    401: CLOSE_BAD_TOKEN,
    403: CLOSE_BAD_SIGNATURE,
    409: CLOSE_REPLACED,
    410: CLOSE_REVOKED,
    426: CLOSE_UNSUPPORTED_PROTOCOL,
    429: CLOSE_RATE_LIMITED,
}
CLOSE_SESSION_GONE = 4404  # HTTP 404 on a session: not a protocol close code, only a retry


class LinkClosed(Exception):
    """The link ended: ``code`` is the WebSocket close code (or its HTTP equivalent)."""

    def __init__(self, code: int, reason: str = "", retry_after: float | None = None) -> None:
        super().__init__(f"{code} {reason}".strip())
        self.code = code
        self.reason = reason
        self.retry_after = retry_after


class Link(Protocol):
    async def hello(self, frame: Frame) -> Frame:
        """Send the unsigned ``hello`` and return the brain's ``hello_ack`` frame."""

    async def send(self, frame: Frame) -> None:
        """Deliver one signed frame; replies come back through ``receive``."""

    async def receive(self) -> tuple[str, Frame]:
        """The next frame from the brain and the channel it came on."""

    async def close(self, code: int = 1000, reason: str = "") -> None:
        """Release the link; never raises."""
