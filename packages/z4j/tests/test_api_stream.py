"""Live updates: a burst of changes becomes one ``changed`` event after the debounce."""

from __future__ import annotations

import asyncio

from z4j.api.v1.stream import change_events
from z4j.brain import Brain


async def test_a_burst_of_changes_is_one_event(brain: Brain) -> None:
    stream = change_events(brain, debounce=0.1, keepalive=0.5, lifetime=10)
    assert (await anext(stream)).startswith("retry: 3000")
    pending = asyncio.ensure_future(anext(stream))
    await asyncio.sleep(0.05)  # the stream is now waiting on the brain's condition
    for _ in range(10):
        await brain.notify_change()
    assert await asyncio.wait_for(pending, 2) == "event: changed\ndata: {}\n\n"
    # Nothing changed since: the next thing on the wire is a keepalive comment.
    assert await asyncio.wait_for(anext(stream), 2) == ": keepalive\n\n"
    await brain.notify_change()
    assert await asyncio.wait_for(anext(stream), 2) == "event: changed\ndata: {}\n\n"
    await stream.aclose()


async def test_a_stream_ends_after_its_lifetime(brain: Brain) -> None:
    items = [item async for item in change_events(brain, keepalive=0.05, lifetime=0.2)]
    assert items[0].startswith("retry:")
    assert set(items[1:]) == {": keepalive\n\n"}


async def test_a_change_signalled_by_another_process_reaches_the_stream(brain: Brain) -> None:
    # Another brain worker process signals through PostgreSQL; simulate it with a separate
    # connection that knows nothing of this process.
    import psycopg
    from z4j.brain import CHANGES_CHANNEL

    stream = change_events(brain, debounce=0.05, keepalive=5, lifetime=10)
    assert (await anext(stream)).startswith("retry:")
    pending = asyncio.ensure_future(anext(stream))
    await asyncio.sleep(0.2)
    conninfo = brain.pool.conninfo
    assert isinstance(conninfo, str)
    async with await psycopg.AsyncConnection.connect(conninfo, autocommit=True) as other:
        await other.execute("SELECT pg_notify(%s, '')", (CHANGES_CHANNEL,))
    assert await asyncio.wait_for(pending, 5) == "event: changed\ndata: {}\n\n"
    await stream.aclose()
