"""One session with the brain over any link: hello, then signed batches, acks, heartbeats, commands.

Events leave the buffer only when the signed ``event_batch_ack`` naming the batch's frame id
arrives: a batch whose ack is lost is sent again in a later frame (new id, new seq) and the brain
deduplicates by event id. One batch is in flight at a time, which keeps acks unambiguous; a
batch holds up to ``batch_size`` events and fits the brain's ``max_frame_size_bytes``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Callable
from typing import Any

from z4j_agent.buffer import EventBuffer
from z4j_agent.config import AgentConfig
from z4j_agent.events import utc_iso
from z4j_agent.identity import ProcessIdentity, active_tasks_field, hello_payload
from z4j_agent.links import Frame, Link, LinkClosed
from z4j_agent.protocol import (
    CLOSE_BAD_HELLO,
    MAX_FRAME_BYTES,
    PROTOCOL_VERSION,
    FrameError,
    FrameSigner,
    FrameVerifier,
    Session,
    unsigned_frame,
)

log = logging.getLogger("z4j_agent")

CommandHandler = Callable[[dict[str, Any]], dict[str, Any]]
ACK_TIMEOUT = 30.0
FRAME_OVERHEAD = 4096


class Shipper:
    def __init__(
        self,
        buffer: EventBuffer,
        config: AgentConfig,
        identity: ProcessIdentity,
        *,
        command_handlers: dict[str, CommandHandler] | None = None,
        is_leader: Callable[[], bool] = lambda: True,
    ) -> None:
        self.buffer = buffer
        self.config = config
        self.identity = identity
        self.command_handlers = dict(command_handlers or {})
        self.is_leader = is_leader
        self.last_flush_at: str | None = None
        self.session: Session | None = None

    async def run(
        self, link: Link, stopping: asyncio.Event, on_ready: Callable[[], None] = lambda: None
    ) -> None:
        """Serve one session until the buffer is drained after ``stopping``, or raise."""
        ack = await link.hello(unsigned_frame("hello", hello_payload(self.identity)))
        payload = _check_hello_ack(ack)
        self.session = Session(
            self.config.hmac_secret,
            payload["agent_id"],
            payload["project_id"],
            payload["session_id"],
        )
        self._link = link
        self._signer = FrameSigner(self.session)
        self._verifiers: dict[str, FrameVerifier] = {}
        self._send_lock = asyncio.Lock()
        self._pending: tuple[str, asyncio.Future[dict[str, Any]]] | None = None
        self._max_frame = _bounded(
            payload.get("max_frame_size_bytes"), MAX_FRAME_BYTES, 64 * 1024, 16 * MAX_FRAME_BYTES
        )
        interval = _bounded(payload.get("heartbeat_interval_seconds"), 10, 1, 300)
        on_ready()
        log.info(
            "z4j agent connected: agent %s, session %s", payload["agent_id"], payload["session_id"]
        )
        tasks = [
            asyncio.create_task(coro)
            for coro in (
                self._send_loop(stopping),
                self._receive_loop(self.session),
                self._heartbeat_loop(interval),
            )
        ]
        try:
            done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        for task in done:
            task.result()

    async def emit(
        self, frame_type: str, payload: dict[str, Any], frame_id: str | None = None
    ) -> Frame:
        # Signing and sending under one lock keeps seq in sending order across tasks.
        async with self._send_lock:
            frame = self._signer.sign(frame_type, payload, frame_id)
            await self._link.send(frame)
            return frame

    async def _send_loop(self, stopping: asyncio.Event) -> None:
        batch_size = self.config.batch_size
        while True:
            if not self.is_leader():
                raise LinkClosed(1000, "another process took over shipping")
            rows = self.buffer.peek(batch_size)
            events, ids = self._fit(rows)
            if events:
                await self._ship(events, ids)
            if not rows and stopping.is_set():
                return
            if len(rows) < batch_size and not stopping.is_set():
                await _wait(stopping, self.config.flush_interval)

    def _fit(self, rows: list[tuple[int, str]]) -> tuple[list[Any], list[int]]:
        budget = self._max_frame - FRAME_OVERHEAD
        events: list[Any] = []
        ids: list[int] = []
        for row_id, body in rows:
            size = len(body.encode()) + 1
            if size > budget and not events:
                log.warning(
                    "dropping event %s: %d bytes exceed the brain's frame limit", row_id, size
                )
                self.buffer.ack([row_id], dropped=True)
                continue
            if size > budget:
                break
            try:
                events.append(json.loads(body))
            except ValueError:
                self.buffer.ack(
                    [row_id], dropped=True
                )  # unreadable rows would block the queue for ever
                continue
            ids.append(row_id)
            budget -= size
        return events, ids

    async def _ship(self, events: list[Any], ids: list[int]) -> None:
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        async with self._send_lock:
            frame = self._signer.sign("event_batch", {"events": events})
            # Set before sending: over HTTP the ack is queued while send() is still running.
            self._pending = (frame["id"], future)
            await self._link.send(frame)
        try:
            ack = await asyncio.wait_for(future, ACK_TIMEOUT)
        except TimeoutError:
            raise LinkClosed(1011, "no event_batch_ack in time") from None
        finally:
            self._pending = None
        self.buffer.ack(ids)
        self.last_flush_at = utc_iso()
        refused = ack.get("refused")
        listed: list[Any] = refused[:5] if isinstance(refused, list) else []
        reasons = [str(r.get("reason"))[:200] for r in listed if isinstance(r, dict)]
        if ack.get("refused_frame"):
            reasons = [str(ack["refused_frame"])[:200]]
        if ack.get("rejected") or reasons:
            log.warning(
                "the brain refused %s of %d events: %s",
                ack.get("rejected") or len(ids),
                len(ids),
                "; ".join(reasons) or "no reason given",
            )

    async def _receive_loop(self, session: Session) -> None:
        while True:
            channel, frame = await self._link.receive()
            if channel not in self._verifiers:
                self._verifiers[channel] = FrameVerifier(session)
            verifier = self._verifiers[channel]
            try:
                verifier.verify(frame)
            except FrameError as exc:
                log.error("z4j agent: rejected a frame from the brain: %s", exc.reason)
                await self._link.close(exc.close_code, exc.reason)
                raise LinkClosed(exc.close_code, exc.reason) from None
            payload = frame["payload"]
            if frame["type"] == "event_batch_ack":
                pending = self._pending
                if pending and payload.get("acked_id") == pending[0] and not pending[1].done():
                    pending[1].set_result(payload)
            elif frame["type"] == "command":
                await self._command(frame)
            elif frame["type"] == "error":
                log.warning("z4j brain reported an error: %s", str(payload)[:500])

    async def _command(self, frame: Frame) -> None:
        """Ack at once, carry the command out, report. As the z4j agents do, the ack and the
        result carry the command frame's id as their own frame id (and ours also put it in
        ``command_id``); the result's status is ``success`` or ``failed``."""
        payload = frame["payload"]
        command_id = str(payload.get("command_id") or frame["id"])
        await self.emit("command_ack", {"command_id": command_id}, frame_id=frame["id"])
        handler = self.command_handlers.get(str(payload.get("action")))
        result: dict[str, Any] = {
            "command_id": command_id,
            "status": "failed",
            "result": None,
            "error": f"this agent does not carry out {str(payload.get('action'))[:80]!r}",
        }
        if handler is not None:
            try:
                outcome = await asyncio.to_thread(handler, payload)
                result.update(status="success", result=outcome, error=None)
            except Exception as exc:  # reported to the brain, not raised
                result["error"] = f"{type(exc).__name__}: {exc}"[:1000]
        await self.emit("command_result", result, frame_id=frame["id"])

    async def _heartbeat_loop(self, interval: float) -> None:
        while True:
            size, dropped = self.buffer.stats()
            await self.emit(
                "heartbeat",
                {
                    "buffer_size": size,
                    "dropped_events": dropped,
                    "last_flush_at": self.last_flush_at,
                    "adapter_health": {"celery": "ok"},
                    **active_tasks_field(self.identity),
                },
            )
            await asyncio.sleep(interval)


def _check_hello_ack(frame: Frame) -> dict[str, Any]:
    payload = frame.get("payload")
    if (
        frame.get("type") != "hello_ack"
        or frame.get("v") != PROTOCOL_VERSION
        or not isinstance(payload, dict)
    ):
        raise LinkClosed(CLOSE_BAD_HELLO, f"expected hello_ack, got {frame.get('type')!r}")
    for name in ("agent_id", "project_id", "session_id"):
        if not isinstance(payload.get(name), str) or not payload[name]:
            raise LinkClosed(CLOSE_BAD_HELLO, f"hello_ack lacks {name}")
    return payload


def _bounded(value: Any, default: int, low: int, high: int) -> int:
    if not isinstance(value, int | float) or isinstance(value, bool):
        return default
    return int(min(max(value, low), high))


async def _wait(event: asyncio.Event, seconds: float) -> None:
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(event.wait(), seconds)
