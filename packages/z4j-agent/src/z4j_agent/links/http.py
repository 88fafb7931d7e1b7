"""The HTTP fallback link (``Z4J_TRANSPORT=http``), for networks that block WebSockets.

``POST /api/v1/agent/hello`` carries the hello frame and returns ``hello_ack``; then every signed
agent frame is a ``POST /api/v1/agent/events`` (an ``event_batch`` is answered by its signed
``event_batch_ack``, other frames by 204) and commands arrive by long poll on
``GET /api/v1/agent/commands``. Requests carry the Bearer token and ``X-Z4J-Session``. The full
contract is in docs/z4j/agent.md.

Requests run with the standard library in short-lived daemon threads, so a long poll that is
still waiting never holds up the shutdown of the transport's event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Any

from z4j_agent.config import AgentConfig
from z4j_agent.identity import AGENT_VERSION
from z4j_agent.links import CLOSE_SESSION_GONE, STATUS_TO_CLOSE, Frame, LinkClosed

MAX_BODY = 16 * 1024 * 1024
Result = tuple[int, bytes, str | None]


def _daemon_call[T](fn: Callable[[], T]) -> asyncio.Future[T]:
    loop = asyncio.get_running_loop()
    future: asyncio.Future[T] = loop.create_future()

    def settle(result: Any, error: BaseException | None) -> None:
        if future.done():
            return
        if error is None:
            future.set_result(result)
        else:
            future.set_exception(error)

    def run() -> None:
        try:
            result, error = fn(), None
        except BaseException as exc:  # handed to the awaiting coroutine
            result, error = None, exc
        with contextlib.suppress(RuntimeError):  # a closed loop: nobody waits any more
            loop.call_soon_threadsafe(settle, result, error)

    threading.Thread(target=run, name="z4j-agent-http", daemon=True).start()
    return future


class HttpLink:
    def __init__(
        self, config: AgentConfig, wait: int = 30, max_frames: int = 50, timeout: float = 30.0
    ) -> None:
        self._config = config
        self._wait = wait
        self._max_frames = max_frames
        self._timeout = timeout
        self._session_id: str | None = None
        self._inbox: asyncio.Queue[tuple[str, Frame] | BaseException] = asyncio.Queue()
        self._poller: asyncio.Task[None] | None = None

    def _request(self, method: str, path: str, body: Frame | None, timeout: float) -> Result:
        headers = {
            "Authorization": f"Bearer {self._config.token}",
            "User-Agent": f"z4j-agent/{AGENT_VERSION}",
            "Accept": "application/json",
        }
        if body is not None:
            headers["Content-Type"] = "application/json"
        if self._session_id is not None:
            headers["X-Z4J-Session"] = self._session_id
        data = None if body is None else json.dumps(body).encode()
        # The scheme is http(s): load_config accepts no other for the brain URL.
        url = self._config.http_url(path)
        request = urllib.request.Request(url, data=data, headers=headers, method=method)  # noqa: S310
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310
                return response.status, response.read(MAX_BODY), None
        except urllib.error.HTTPError as exc:
            with exc:
                return exc.code, exc.read(64 * 1024), exc.headers.get("Retry-After")

    async def _call(
        self, method: str, path: str, body: Frame | None = None, seconds: float | None = None
    ) -> Result:
        # The deadline is the socket timeout of the request thread, not an asyncio timeout.
        status, payload, retry_after = await _daemon_call(
            lambda: self._request(method, path, body, seconds or self._timeout)
        )
        if status >= 400:
            code = CLOSE_SESSION_GONE if status == 404 else STATUS_TO_CLOSE.get(status, 1011)
            delay = float(retry_after) if retry_after and retry_after.isdigit() else None
            raise LinkClosed(code, f"HTTP {status} on {path.split('?')[0]}", delay)
        return status, payload, retry_after

    @staticmethod
    def _frame(payload: bytes) -> Frame:
        frame = json.loads(payload)
        if not isinstance(frame, dict):
            raise LinkClosed(1011, "the brain answered with something other than a frame")
        return frame

    async def hello(self, frame: Frame) -> Frame:
        self._session_id = None
        _, payload, _ = await self._call("POST", "/api/v1/agent/hello", frame)
        ack = self._frame(payload)
        session = ack.get("payload", {}).get("session_id") if ack.get("payload") else None
        self._session_id = str(session) if session is not None else None
        self._poller = asyncio.create_task(self._poll())
        return ack

    async def send(self, frame: Frame) -> None:
        status, payload, _ = await self._call("POST", "/api/v1/agent/events", frame)
        if status == 200 and payload.strip():
            await self._inbox.put(("events", self._frame(payload)))

    async def _poll(self) -> None:
        path = f"/api/v1/agent/commands?wait={self._wait}&max_frames={self._max_frames}"
        try:
            while True:
                _, payload, _ = await self._call("GET", path, seconds=self._wait + 15)
                frames = json.loads(payload).get("frames", []) if payload.strip() else []
                for frame in frames:
                    await self._inbox.put(("commands", frame))
                if not frames:  # a brain that answers at once must not make this spin
                    await asyncio.sleep(0.5)
        except asyncio.CancelledError:
            raise
        except BaseException as exc:  # surfaced through receive()
            await self._inbox.put(exc)

    async def receive(self) -> tuple[str, Frame]:
        item = await self._inbox.get()
        if isinstance(item, BaseException):
            raise item
        return item

    async def close(self, code: int = 1000, reason: str = "") -> None:
        if self._poller is not None:
            self._poller.cancel()
            self._poller = None
