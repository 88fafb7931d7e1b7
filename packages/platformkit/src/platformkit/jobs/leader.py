"""Leader per shard: run a periodic body on exactly one replica per advisory-lock key.

Every replica runs a ``LeaderLoop`` over the same keys. The loop keeps one dedicated connection
and, every ``poll_interval``, checks it (a cheap query bounded by ``check_timeout``) and tries
``pg_try_advisory_lock(namespace, shard)`` for each key it does not hold. A held key gets a
task that runs ``body(key)`` every ``interval``, checking the connection right before each run.

Any error on the lock connection ends leadership of every key at once: the shard tasks are
cancelled, ``on_loss`` fires, and the loop waits ``rejoin_delay`` before competing again, so a
healthy replica takes over first. Bounds, with P = poll_interval and C = check_timeout:

- the server releases the locks when the holder's session ends (terminated backend, crashed
  process); a follower takes the key within P;
- the old holder stops acting within P + C: a body already running is cancelled then, and no
  new body starts without a successful check;
- a holder host that disappears without closing its socket is dropped by the server after TCP
  keepalive detection (``keepalive_seconds``, ~11 s by default), then a follower takes over
  within P.

C (5 s by default) stays below that detection, so a holder cut off from the server stops before
a follower can take its keys; it is not shorter because a replica on a busy machine answers a
check late without being gone, and each late answer would cost a leadership hand-over.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
from collections.abc import Awaitable, Callable, Sequence
from types import TracebackType
from typing import Any, Self

from psycopg import AsyncConnection

from platformkit.db.scope import Pool
from platformkit.jobs.keys import LockKey

log = logging.getLogger(__name__)

Body = Callable[[LockKey], Awaitable[None]]
Callback = Callable[[LockKey], object]


class LeaderLoop:
    """Leads a subset of ``keys`` (at most ``max_keys``) and runs ``body`` for each one led."""

    def __init__(
        self,
        db: Pool | str,
        keys: LockKey | Sequence[LockKey],
        interval: float,
        body: Body,
        *,
        poll_interval: float = 1.0,
        check_timeout: float = 5.0,
        rejoin_delay: float | None = None,
        max_keys: int | None = None,
        on_gain: Callback | None = None,
        on_loss: Callback | None = None,
        keepalive_seconds: int = 5,
    ) -> None:
        self.keys: list[LockKey] = [keys] if isinstance(keys, tuple) else list(keys)
        self.interval = interval
        self.poll_interval = poll_interval
        self.check_timeout = check_timeout
        self.rejoin_delay = 2 * poll_interval if rejoin_delay is None else rejoin_delay
        self.max_keys = len(self.keys) if max_keys is None else max_keys
        conninfo = db if isinstance(db, str) else db.conninfo
        if not isinstance(conninfo, str):
            raise TypeError("this pool computes its conninfo; pass the database URL instead")
        self._conninfo = conninfo
        self._keepalive = keepalive_seconds
        self._body, self._on_gain, self._on_loss = body, on_gain, on_loss
        self._conn: AsyncConnection[Any] | None = None
        self._shards: dict[LockKey, asyncio.Task[None]] = {}
        self._keeper: asyncio.Task[None] | None = None
        self._stop = asyncio.Event()

    @property
    def is_leader(self) -> bool:
        """True while this loop leads at least one key."""
        return bool(self._shards)

    @property
    def led(self) -> frozenset[LockKey]:
        return frozenset(self._shards)

    def leads(self, key: LockKey) -> bool:
        return key in self._shards

    @property
    def backend_pid(self) -> int | None:
        """The server process holding this loop's locks (for pg_stat_activity and drills)."""
        return self._conn.info.backend_pid if self._conn is not None else None

    async def start(self) -> None:
        if self._keeper is None:
            self._stop.clear()
            self._keeper = asyncio.create_task(self._keep(), name="leader-keeper")

    async def stop(self) -> None:
        """Stop the bodies, release every key and close the connection."""
        if self._keeper is None:
            return
        self._stop.set()
        self._keeper.cancel()
        await asyncio.gather(self._keeper, return_exceptions=True)
        self._keeper = None
        if self._conn is not None:
            # Bodies are cancelled before the connection closes, and closing ends the session,
            # which releases its advisory locks: no body runs after a follower can take over.
            await self._drop(self._conn, "stopped", quiet=True)

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()

    # -- the keeper: connection health and lock acquisition -----------------------------------

    async def _connect(self) -> AsyncConnection[Any]:
        k = self._keepalive
        return await AsyncConnection.connect(
            self._conninfo,
            autocommit=True,
            connect_timeout=max(2, int(self.check_timeout + 1)),
            keepalives=1,
            keepalives_idle=k,
            keepalives_interval=2,
            keepalives_count=3,
            # the server side too, so it drops a vanished holder and frees the locks
            options=f"-c tcp_keepalives_idle={k} -c tcp_keepalives_interval=2 "
            "-c tcp_keepalives_count=3 -c application_name=platformkit-leader",
        )

    async def _keep(self) -> None:
        while not self._stop.is_set():
            delay = self.poll_interval
            conn = self._conn
            try:
                if conn is None:
                    conn = self._conn = await self._connect()
                await self._check(conn)
                for key in self.keys:
                    if len(self._shards) >= self.max_keys:
                        break
                    if key not in self._shards and await self._try_lock(conn, key):
                        await self._gain(conn, key)
            except Exception as exc:  # any failure on the lock connection ends leadership
                if conn is not None:
                    await self._drop(conn, f"{type(exc).__name__}: {exc}")
                delay = self.rejoin_delay
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stop.wait(), delay)

    async def _check(self, conn: AsyncConnection[Any]) -> None:
        await asyncio.wait_for(conn.execute("SELECT 1"), self.check_timeout)

    async def _try_lock(self, conn: AsyncConnection[Any], key: LockKey) -> bool:
        cur = await asyncio.wait_for(
            conn.execute("SELECT pg_try_advisory_lock(%s, %s)", key), self.check_timeout
        )
        row = await cur.fetchone()
        return bool(row and row[0])

    async def _gain(self, conn: AsyncConnection[Any], key: LockKey) -> None:
        if self._conn is not conn:
            return  # dropped while the lock query was answered: that lock died with the session
        self._shards[key] = asyncio.create_task(self._lead(conn, key), name=f"leader:{key}")
        await self._notify(self._on_gain, key)

    async def _drop(self, conn: AsyncConnection[Any], reason: str, *, quiet: bool = False) -> None:
        """End leadership of every key held on ``conn``; idempotent per connection."""
        if self._conn is not conn:
            return
        self._conn = None
        lost = list(self._shards.items())
        self._shards.clear()
        current = asyncio.current_task()
        for _key, task in lost:
            if task is not current:
                task.cancel()
        await asyncio.gather(*(t for _k, t in lost if t is not current), return_exceptions=True)
        with contextlib.suppress(Exception):
            await conn.close()
        if lost and not quiet:
            log.warning("leader: lost %d key(s): %s", len(lost), reason)
        for key, _task in lost:
            await self._notify(self._on_loss, key)

    # -- a led shard --------------------------------------------------------------------------

    async def _lead(self, conn: AsyncConnection[Any], key: LockKey) -> None:
        loop = asyncio.get_running_loop()
        while True:
            started = loop.time()
            try:
                await self._check(conn)
            except Exception as exc:
                await self._drop(conn, f"check before body: {type(exc).__name__}: {exc}")
                return
            try:
                await self._body(key)
            except Exception:
                log.exception("leader: body for %s failed", key)
            await asyncio.sleep(max(0.0, self.interval - (loop.time() - started)))

    async def _notify(self, callback: Callback | None, key: LockKey) -> None:
        if callback is None:
            return
        try:
            result = callback(key)
            if inspect.isawaitable(result):
                await result
        except Exception:
            log.exception("leader: callback for %s failed", key)
