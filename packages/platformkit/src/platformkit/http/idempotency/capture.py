"""The ASGI middleware that stores an idempotent request's response before it is sent.

It watches the response of a request whose key was claimed: a complete 2xx response (start and
a single body message) is stored and its claim committed *before* the client sees a byte, so a
client that got the answer and retries always finds it. A response sent in several body messages
(streamed), a non-2xx response, an exception or a client gone away rolls the claim back instead.
Requests without a claim pass through untouched.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from platformkit.http.idempotency.claim import SCOPE_KEY, Slot

__all__ = ["IdempotencyMiddleware"]


def _headers(message: Message) -> dict[str, str]:
    return {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in message.get("headers", ())}


class IdempotencyMiddleware:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        slot = Slot()
        scope[SCOPE_KEY] = slot
        held_start: Message | None = None

        async def capture(message: Message) -> None:
            nonlocal held_start
            claim = slot.claim
            if claim is None or claim.done:
                await send(message)
                return
            if message["type"] == "http.response.start":
                held_start = message  # held until the body shows whether to store
                return
            if held_start is None:  # an extension message before the start: not ours to judge
                await claim.abandon()
            elif message["type"] == "http.response.body" and not message.get("more_body"):
                await claim.finish(
                    int(held_start["status"]), _headers(held_start), bytes(message.get("body", b""))
                )
            else:
                await claim.abandon()  # streamed or sent by an extension: never stored
            if held_start is not None:
                await send(held_start)
                held_start = None
            await send(message)

        try:
            await self.app(scope, receive, capture)
        finally:
            if slot.claim is not None and not slot.claim.done:
                await slot.claim.abandon()
