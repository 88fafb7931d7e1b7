"""Headers the gateway adds to every HTTP answer (04-API-SPEC §1.1, §1.6):

- ``AgentBus-Trace-Id`` (32 hex): a send's answer names its envelope's trace (set by the send
  path); any other answer the trace of the caller's ``traceparent`` header, or a new one;
- ``RateLimit-Limit``, ``-Remaining`` and ``-Reset`` of the bucket the request took from
  (``request_limits.note_quota``); a refusal carries its own.

A header the route already set is left as it is.
"""

from __future__ import annotations

import secrets

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from agentbus.gateway.api.request_limits import STATE_KEY, Quota
from agentbus.gateway.domain.envelope import TRACE_HEADER, trace_of

__all__ = ["GatewayHeaders"]


def _caller_trace(scope: Scope) -> str:
    for name, value in scope.get("headers", ()):
        if name == b"traceparent":
            return trace_of(value.decode("latin-1")) or secrets.token_hex(16)
    return secrets.token_hex(16)


class GatewayHeaders:
    """Pure ASGI middleware around the gateway app."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                wanted = {TRACE_HEADER: _caller_trace(scope)}
                quota = scope.get("state", {}).get(STATE_KEY)
                if isinstance(quota, Quota):
                    wanted |= quota.headers()
                headers = list(message.get("headers", []))
                present = {name.lower() for name, _ in headers}
                headers += [
                    (name.lower().encode(), value.encode())
                    for name, value in wanted.items()
                    if name.lower().encode() not in present
                ]
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, with_headers)
