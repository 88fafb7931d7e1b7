"""Liveness and readiness: ``/healthz`` answers while the process runs, ``/readyz`` asks the
registered checks (a ``SELECT 1`` on the pool, a broker ping) whether requests can be served.

A check is an async callable that raises (or returns ``False``) when its dependency is not
usable. Checks run concurrently, each under a timeout; a failure is logged with its cause and
reported to the client by name only, as a 503 problem with ``failed: [names]``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from psycopg import AsyncConnection
from psycopg_pool import AsyncConnectionPool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from platformkit.http.problems import NotReady

__all__ = ["Readiness", "ReadinessCheck", "healthz", "pool_check"]

log = logging.getLogger("platformkit.http.health")

ReadinessCheck = Callable[[], Awaitable[object]]


class Readiness:
    """The named checks behind ``/readyz``; more may be added once resources exist (lifespan)."""

    def __init__(
        self, checks: Mapping[str, ReadinessCheck] | None = None, *, timeout: float = 2.0
    ) -> None:
        self.checks: dict[str, ReadinessCheck] = dict(checks or {})
        self.timeout = timeout

    def add(self, name: str, check: ReadinessCheck) -> None:
        self.checks[name] = check

    async def _one(self, name: str, check: ReadinessCheck) -> bool:
        try:
            async with asyncio.timeout(self.timeout):
                result = await check()
        except Exception:
            log.warning("readiness check %s failed", name, exc_info=True)
            return False
        if result is False:
            log.warning("readiness check %s reported not ready", name)
            return False
        return True

    async def run(self) -> dict[str, bool]:
        names = list(self.checks)
        results = await asyncio.gather(*(self._one(n, self.checks[n]) for n in names))
        return dict(zip(names, results, strict=True))

    async def endpoint(self, request: Request) -> Response:
        results = await self.run()
        failed = sorted(name for name, ok in results.items() if not ok)
        if failed:
            raise NotReady(f"failing: {', '.join(failed)}", failed=failed)
        return JSONResponse({"status": "ready", "checks": dict.fromkeys(results, "ok")})


async def healthz(request: Request) -> Response:
    """The process is alive and its event loop turns; deliberately no I/O."""
    return JSONResponse({"status": "ok"})


def pool_check(
    pool: AsyncConnectionPool[AsyncConnection[Any]]
    | Callable[[], AsyncConnectionPool[AsyncConnection[Any]]],
) -> ReadinessCheck:
    """A check running ``SELECT 1`` on a pooled connection; ``pool`` may be a callable returning
    the pool, for pools opened later in the app's lifespan."""

    async def check() -> None:
        target = pool() if callable(pool) else pool
        async with target.connection() as conn:
            await conn.execute("SELECT 1")

    return check
