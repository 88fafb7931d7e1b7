"""The sidecar loop inside the MCP server: a harness starts ``agentbus mcp serve`` and nothing
else, so the server receives for its agent itself, on the same runtime its tools use, whenever no
other process does (``sidecar.lock``, as ``agentbus sidecar run`` takes it). While another
process holds the lock, its loop receives and the tools read what it stores; the server looks
again every few seconds and takes over when that process has gone.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from contextlib import suppress
from pathlib import Path

from agentbus_sidecar.errors import ConfigError
from agentbus_sidecar.runtime import Runtime
from agentbus_sidecar.sync import hold_run_lock
from agentbus_sidecar.sync import run as run_loop

__all__ = ["keep_loop_running"]

RETRY_S = 5.0


async def keep_loop_running(
    rt: Runtime, state_db: Path, stop: asyncio.Event, log: Callable[[str], None]
) -> None:
    """Until ``stop``: run the loop while this process holds the agent's lock."""
    announced = False
    while not stop.is_set():
        try:
            with hold_run_lock(state_db):
                log(f"receiving for {rt.address}")
                announced = False
                inner = asyncio.Event()  # the loop sets its event when it ends
                relay = asyncio.create_task(_relay(stop, inner))
                try:
                    await run_loop(rt, inner, log=log)
                finally:
                    relay.cancel()
        except ConfigError as exc:
            if not announced:
                log(f"not receiving here: {exc}")
                announced = True
        with suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), RETRY_S)


async def _relay(outer: asyncio.Event, inner: asyncio.Event) -> None:
    await outer.wait()
    inner.set()
