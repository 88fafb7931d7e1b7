"""The background thread that ships the buffer to the brain, reconnecting for as long as it lives.

Celery workers are synchronous, so the agent runs its own asyncio loop in one daemon thread.
Before connecting, the thread takes the buffer's ``shipper`` lease, so of all processes that share
a buffer file exactly one talks to the brain. Failures back off exponentially with jitter (1 s
doubling to 30 s); close codes that retrying cannot fix (bad token, bad signature, revoked,
unsupported protocol, bad hello) are logged as errors and retried only every five minutes.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import secrets
import socket
import threading

from websockets.exceptions import WebSocketException

from z4j_agent.buffer import EventBuffer
from z4j_agent.config import AgentConfig
from z4j_agent.identity import ProcessIdentity
from z4j_agent.links import Link, LinkClosed
from z4j_agent.links.http import HttpLink
from z4j_agent.links.websocket import WebSocketLink
from z4j_agent.protocol import (
    CLOSE_BAD_HELLO,
    CLOSE_BAD_SIGNATURE,
    CLOSE_BAD_TOKEN,
    CLOSE_RATE_LIMITED,
    CLOSE_REPLACED,
    CLOSE_REVOKED,
    CLOSE_UNSUPPORTED_PROTOCOL,
)
from z4j_agent.shipper import CommandHandler, Shipper

log = logging.getLogger("z4j_agent")

BACKOFF_BASE = 1.0
BACKOFF_CAP = 30.0
FATAL_DELAY = 300.0
REPLACED_DELAY = 30.0
LEASE_TTL = 15.0
FATAL = {
    CLOSE_BAD_TOKEN: "the brain rejected the agent token: check Z4J_TOKEN",
    CLOSE_BAD_SIGNATURE: "the brain rejected the frame signatures (or this IP): "
    "check Z4J_HMAC_SECRET",
    CLOSE_REVOKED: "the brain revoked this agent",
    CLOSE_UNSUPPORTED_PROTOCOL: "the brain does not speak protocol v2: upgrade the agent",
    CLOSE_BAD_HELLO: "the brain rejected the hello frame",
}


def backoff_delay(attempt: int, rng: random.Random | None = None) -> float:
    """Equal jitter: half the exponential step fixed, half random, capped at BACKOFF_CAP."""
    step = min(BACKOFF_CAP, BACKOFF_BASE * (1 << min(attempt, 16)))
    jitter: float = (rng or random.SystemRandom()).uniform(0, step / 2)
    return step / 2 + jitter


def close_delay(exc: LinkClosed, attempt: int) -> float:
    if exc.code in FATAL:
        log.error(
            "z4j agent: %s (close code %s, %s); retrying in %.0f s",
            FATAL[exc.code],
            exc.code,
            exc.reason,
            FATAL_DELAY,
        )
        return FATAL_DELAY
    if exc.code == CLOSE_REPLACED:
        log.warning(
            "z4j agent: another connection replaced this session; retrying in %.0f s",
            REPLACED_DELAY,
        )
        return REPLACED_DELAY
    delay = backoff_delay(attempt)
    if exc.code == CLOSE_RATE_LIMITED:
        delay = max(delay, exc.retry_after or BACKOFF_CAP)
    log.warning("z4j agent: link closed (%s); reconnecting in %.1f s", exc, delay)
    return delay


class Transport:
    """Ships ``buffer`` in a daemon thread; ``stop`` drains it (best effort) and joins."""

    def __init__(
        self,
        config: AgentConfig,
        buffer: EventBuffer,
        identity: ProcessIdentity,
        *,
        command_handlers: dict[str, CommandHandler] | None = None,
        lease_ttl: float = LEASE_TTL,
    ) -> None:
        self.config = config
        self.buffer = buffer
        self.owner = f"{socket.gethostname()}:{identity.pid}:{secrets.token_hex(4)}"
        self.leader = False
        self.lease_ttl = lease_ttl
        self.shipper = Shipper(
            buffer,
            config,
            identity,
            command_handlers=command_handlers,
            is_leader=lambda: self.leader,
        )
        self.connected = False
        self.established = False
        self._drain_timeout = 4.5
        self._stop_flag = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopping: asyncio.Event | None = None
        self._thread = threading.Thread(target=self._run, name="z4j-agent-transport", daemon=True)

    def start(self) -> None:
        self._thread.start()

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    def stop(self, timeout: float = 5.0) -> None:
        """Ship what is left while connected, for up to ``timeout`` seconds, then stop."""
        self._drain_timeout = max(0.0, timeout - 0.5)
        self._stop_flag.set()
        loop, stopping = self._loop, self._stopping
        if loop is not None and stopping is not None:
            with contextlib.suppress(RuntimeError):  # the loop already finished
                loop.call_soon_threadsafe(stopping.set)
        if self._thread.is_alive():
            self._thread.join(timeout)

    def _run(self) -> None:
        try:
            asyncio.run(self._main())
        except Exception:  # a crash here must never reach the worker's threads
            log.exception("z4j agent transport stopped unexpectedly")

    async def _main(self) -> None:
        self._stopping = stopping = asyncio.Event()
        self._loop = asyncio.get_running_loop()
        if self._stop_flag.is_set():
            stopping.set()
        lease = asyncio.create_task(self._keep_lease(stopping))
        attempt = 0
        try:
            while not stopping.is_set():
                if not self.leader:
                    await _sleep(stopping, 1.0)
                    continue
                self.established = False
                delay = await self._session(attempt, stopping)
                # A session that reached hello_ack starts the backoff over.
                attempt = 1 if self.established else attempt + 1
                if delay is not None:
                    await _sleep(stopping, delay)
        finally:
            lease.cancel()
            await asyncio.gather(lease, return_exceptions=True)
            if self.leader:
                self.buffer.release(self.owner)

    async def _session(self, attempt: int, stopping: asyncio.Event) -> float | None:
        """Run one connection; the delay before the next, or None after a clean drain."""
        link: Link = (
            HttpLink(self.config) if self.config.transport == "http" else WebSocketLink(self.config)
        )
        run = asyncio.create_task(self._connected(link, stopping))

        def attempt_of() -> int:
            return 0 if self.established else attempt

        stop_wait = asyncio.create_task(stopping.wait())
        try:
            await asyncio.wait({run, stop_wait}, return_when=asyncio.FIRST_COMPLETED)
            if not run.done():
                await asyncio.wait({run}, timeout=self._drain_timeout)
            if not run.done():
                run.cancel()
                await asyncio.gather(run, return_exceptions=True)
                return None
            run.result()
            return None
        except LinkClosed as exc:
            return close_delay(exc, attempt_of())
        except (OSError, TimeoutError, ValueError, WebSocketException) as exc:
            delay = backoff_delay(attempt_of())
            log.warning(
                "z4j agent: cannot reach the brain (%s); retrying in %.1f s",
                exc or type(exc).__name__,
                delay,
            )
            return delay
        except Exception:  # keep shipping whatever went wrong
            log.exception("z4j agent: session failed")
            return backoff_delay(attempt_of())
        finally:
            stop_wait.cancel()
            self.connected = False
            await link.close()

    async def _connected(self, link: Link, stopping: asyncio.Event) -> None:
        await self.shipper.run(link, stopping, on_ready=self._mark_connected)

    def _mark_connected(self) -> None:
        self.connected = self.established = True

    async def _keep_lease(self, stopping: asyncio.Event) -> None:
        while not stopping.is_set():
            try:
                self.leader = self.buffer.try_lead(self.owner, self.lease_ttl)
            except Exception as exc:  # a locked or broken file: try again
                log.warning("z4j agent: buffer lease failed: %s", exc)
                self.leader = False
            await _sleep(stopping, self.lease_ttl / 3)


async def _sleep(stopping: asyncio.Event, seconds: float) -> None:
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(stopping.wait(), seconds)
