"""The sync loop behind ``agentbus sidecar run``, and the one-shot sync CLI commands use.

Two tasks share one state.db connection (no transaction spans an ``await``, so they never
interleave inside one):

- receiver: drain queued acks and reads, long-poll ``GET /v1/inbox``, take custody of each
  delivery (inbox + dedupe + queued ack, one transaction), then send the transport acks. Acks
  are drained before every pull, so after a restart our own acks reach the gateway before any
  redelivery they would cancel (05 §10.4). Failures back off 1 s to 30 s; an answer saying
  the gateway is stopping (``draining``) is followed by a pause of 0.5 to 1 s. With push delivery
  (the default), the receiver holds the delivery WebSocket instead (``push``), which also brings
  the status of this agent's sent messages; a gateway that does not upgrade is long-polled.
- flusher: every second, flush due outbox rows (sends by lane, acks, reads, naks: as frames on
  the receiver's delivery WebSocket while it is open, ``outbound.Uplink``, else over HTTP), check
  unpublished receipts, report unpresented messages that expired, upload captured usage
  (``usage_upload``), heartbeat every 30 s,
  apply local retention every hour, and once a day replace the agent's key when 30 days or less
  are left of it (``rotation``; an hour later again after a failure), or at once when a
  heartbeat finds it unusable (revoked: AB-1010 once the credential is renewed).

A pending resync of the inbox (``resync``: a new state.db, or ``inbox --resync``) runs before the
loop starts and in ``sync_once`` before the pull.
"""

from __future__ import annotations

import asyncio
import fcntl
import os
import socket
import sqlite3
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentbus_sidecar.backoff import reconnect_delay_s
from agentbus_sidecar.clock import server_now, utcnow
from agentbus_sidecar.errors import ConfigError, GatewayError, GatewayUnreachable, SidecarError
from agentbus_sidecar.inbound import accept_deliveries
from agentbus_sidecar.outbound import (
    FlushReport,
    Uplink,
    flush_sends,
    flush_settlements,
    refresh_unpublished,
)
from agentbus_sidecar.resync import resync_if_pending
from agentbus_sidecar.rotation import KEY_UNUSABLE, key_expiry, rotate_key, rotation_due
from agentbus_sidecar.runtime import Runtime
from agentbus_sidecar.store import inbox
from agentbus_sidecar.store.retention import prune
from agentbus_sidecar.usage_upload import upload_usage

__all__ = [
    "DELIVERIES",
    "LONG_POLL",
    "PUSH",
    "SyncReport",
    "flush",
    "hold_run_lock",
    "receive_once",
    "run",
    "sync_once",
]

HEARTBEAT_S = 30.0
RETENTION_S = 3600.0
KEY_CHECK_S, KEY_RETRY_S = 86400.0, 3600.0
FLUSH_EVERY_S = 1.0
PUSH, LONG_POLL = "websocket", "long-poll"
DELIVERIES = (PUSH, LONG_POLL)


@dataclass
class SyncReport:
    flush: FlushReport
    received: list[tuple[str, str]] = field(default_factory=list)
    expired: list[str] = field(default_factory=list)
    restored: list[tuple[str, str]] = field(default_factory=list)


async def flush(
    rt: Runtime,
    lock: asyncio.Lock | None = None,
    *,
    drain: bool = False,
    uplink: Uplink | None = None,
) -> FlushReport:
    """Settlements first (acks cancel redeliveries), then sends lane by lane; on the delivery
    WebSocket while ``uplink`` holds it, otherwise over HTTP."""
    report, via = FlushReport(), uplink or Uplink()
    async with lock or asyncio.Lock():
        await flush_settlements(rt, utcnow(), report, drain=drain, settle=via.settle)
        if report.unreachable is None:
            await refresh_unpublished(rt, utcnow())
        await flush_sends(rt, utcnow(), report, send_batch=via.send_batch)
    return report


async def receive_once(rt: Runtime, wait_s: int) -> list[tuple[str, str]]:
    outcomes, _draining = await _pull(rt, wait_s)
    return outcomes


async def _pull(rt: Runtime, wait_s: int) -> tuple[list[tuple[str, str]], bool]:
    """One long-poll taken into custody, and whether the gateway said it is stopping."""
    body = await rt.session.call(rt.client.receive, wait_s)
    deliveries: list[dict[str, Any]] = body.get("deliveries") or []
    return accept_deliveries(rt.conn, deliveries, rt.address, utcnow()), body.get(
        "draining"
    ) is True


async def sync_once(rt: Runtime, *, wait_s: int = 0, receive: bool = True) -> SyncReport:
    """Flush, pull once, store, ack: what a CLI command does before it reads the inbox. With
    ``receive`` off (a running loop receives for everyone: its delivery connection must not be
    replaced by a poll of ours) only the flush."""
    report = SyncReport(await flush(rt, drain=True))
    if receive and report.flush.unreachable is None:
        try:
            report.restored = await resync_if_pending(rt)
            report.received = await receive_once(rt, wait_s)
        except GatewayUnreachable as exc:
            report.flush.unreachable = str(exc)
        else:
            await flush_settlements(rt, utcnow(), report.flush)
            await upload_usage(rt)
    report.expired = inbox.expire_unpresented(rt.conn, utcnow())
    return report


def run_lock_held(state_db: Path) -> bool:
    """Whether a ``sidecar run`` holds the agent's lock now (it receives for everyone then)."""
    try:
        with hold_run_lock(state_db):
            return False
    except ConfigError:
        return True


@contextmanager
def hold_run_lock(state_db: Path) -> Iterator[None]:
    """One ``sidecar run`` per agent: a second long-poll would only replace the first."""
    fd = os.open(state_db.parent / "sidecar.lock", os.O_CREAT | os.O_RDWR, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise ConfigError("a sidecar is already running for this agent") from None
        yield
    finally:
        os.close(fd)


async def _sleep(stop: asyncio.Event, seconds: float) -> None:
    with suppress(TimeoutError):
        await asyncio.wait_for(stop.wait(), timeout=seconds)


async def _unless_stopped[T](stop: asyncio.Event, work: Awaitable[T]) -> T | None:
    task = asyncio.ensure_future(work)
    stopper = asyncio.ensure_future(stop.wait())
    await asyncio.wait({task, stopper}, return_when=asyncio.FIRST_COMPLETED)
    stopper.cancel()
    if not task.done():
        task.cancel()
        with suppress(asyncio.CancelledError):
            await task
        return None
    return task.result()


async def _receiver(
    rt: Runtime, stop: asyncio.Event, lock: asyncio.Lock, wait_s: int, log: Callable[[str], None]
) -> None:
    failures, started = 0, False
    while not stop.is_set():
        try:
            async with lock:
                # Before the first pull and after an outage, every queued ack goes out first,
                # whatever its retry schedule, so it can cancel the redelivery it would cause.
                drain = failures > 0 or not started
                await flush_settlements(rt, utcnow(), FlushReport(), drain=drain)
                started = True
            pulled = await _unless_stopped(stop, _pull(rt, wait_s))
            if pulled is None:
                return
            outcomes, draining = pulled
            async with lock:
                await flush_settlements(rt, utcnow(), FlushReport())
            for msg_id, outcome in outcomes:
                log(f"{msg_id} {outcome}")
            failures = 0
            if draining:  # the gateway is stopping: poll its successor after a pause
                log("the gateway is stopping; polling again shortly")
                await _sleep(stop, reconnect_delay_s(1))
        except (GatewayUnreachable, GatewayError, sqlite3.OperationalError) as exc:
            # A locked or full disk is a reason to let AckWait redeliver, not to stop.
            failures += 1
            delay = reconnect_delay_s(failures)
            log(f"receive failed ({exc}); retrying in {delay:.1f} s")
            await _sleep(stop, delay)


async def _pushed(
    rt: Runtime,
    stop: asyncio.Event,
    lock: asyncio.Lock,
    wait_s: int,
    log: Callable[[str], None],
    uplink: Uplink,
) -> None:
    # Imported here: the WebSocket client would add some 50 ms to every other command's start.
    from agentbus_sidecar.push import PushUnavailable, receive_pushed

    try:
        await receive_pushed(rt, stop, lock, log, uplink)
    except PushUnavailable as exc:
        log(f"the gateway does not offer the delivery WebSocket ({exc}); long-polling instead")
        await _receiver(rt, stop, lock, wait_s, log)


async def _flusher(
    rt: Runtime,
    stop: asyncio.Event,
    lock: asyncio.Lock,
    log: Callable[[str], None],
    uplink: Uplink,
) -> None:
    loop = asyncio.get_running_loop()
    next_heartbeat = next_prune = next_key_check = loop.time()
    while not stop.is_set():
        try:
            report = await flush(rt, lock, uplink=uplink)
        except sqlite3.OperationalError as exc:
            log(f"state.db busy ({exc}); retrying")
            await _sleep(stop, FLUSH_EVERY_S)
            continue
        for msg_id in report.sent:
            log(f"{msg_id} sent")
        for msg_id, error in report.failed.items():
            log(f"{msg_id} failed for good: {error}")
        for msg_id in inbox.expire_unpresented(rt.conn, utcnow()):
            log(f"{msg_id} expired before it was presented")
        if report.unreachable is None:
            for problem in (await upload_usage(rt))[1]:
                log(f"a usage record was refused: {problem}")
        key_unusable = False
        if loop.time() >= next_heartbeat:
            next_heartbeat = loop.time() + HEARTBEAT_S
            key_unusable = await _heartbeat(rt)
        if loop.time() >= next_prune:
            next_prune = loop.time() + RETENTION_S
            removed = prune(rt.conn, utcnow())
            if any(removed.values()):
                log(f"retention removed {removed}")
        if key_unusable or loop.time() >= next_key_check:
            next_key_check = loop.time() + await _keep_key_fresh(rt, log, now=key_unusable)
        await _sleep(stop, FLUSH_EVERY_S)


async def _heartbeat(rt: Runtime) -> bool:
    """Send a heartbeat; True when the gateway said the key can no longer prove anything
    (revoked, or expired: AB-1010 when a credential was renewed)."""
    body = {"status": "online", "host": socket.gethostname()}
    try:
        await rt.session.call(rt.client.heartbeat, rt.agent_id, body)
    except GatewayUnreachable:
        return False
    except GatewayError as exc:
        return exc.code == KEY_UNUSABLE
    return False


async def _keep_key_fresh(rt: Runtime, log: Callable[[str], None], *, now: bool = False) -> float:
    """Rotate the key if it is due, or ``now`` (it is unusable); seconds until the next
    check."""
    try:
        if now or rotation_due(await key_expiry(rt), server_now()):
            done = await rotate_key(rt)
            log(f"key rotated: now signing with {done.key_id}; {done.old_key_id} expires alone")
            for msg_id in done.signed_again:
                log(f"{msg_id} signed again with the new key and queued")
    except ConfigError:
        raise
    except SidecarError as exc:  # the gateway away or refusing, an answer without a key
        log(f"key rotation failed ({exc}); trying again in an hour")
        return KEY_RETRY_S
    return KEY_CHECK_S


async def run(
    rt: Runtime,
    stop: asyncio.Event,
    *,
    wait_s: int = 25,
    delivery: str = PUSH,
    log: Callable[[str], None] = lambda _line: None,
) -> None:
    """Run until ``stop`` is set; a ConfigError (e.g. no usable credential) ends it early.
    ``delivery`` is ``PUSH`` (the WebSocket) or ``LONG_POLL`` (``wait_s`` a poll)."""
    if delivery not in DELIVERIES:
        raise ConfigError(f"delivery is one of {', '.join(DELIVERIES)}, not {delivery!r}")
    try:
        for msg_id, outcome in await resync_if_pending(rt):
            log(f"{msg_id} {outcome} (resync of a new state.db)")
    except (GatewayUnreachable, GatewayError) as exc:
        log(f"resync failed ({exc}); the next sync tries again")
    lock, uplink = asyncio.Lock(), Uplink()
    receiver = (
        _pushed(rt, stop, lock, wait_s, log, uplink)
        if delivery == PUSH
        else _receiver(rt, stop, lock, wait_s, log)
    )
    tasks = [
        asyncio.create_task(receiver),
        asyncio.create_task(_flusher(rt, stop, lock, log, uplink)),
    ]
    try:
        done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
        for task in done:
            task.result()
    finally:
        stop.set()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
