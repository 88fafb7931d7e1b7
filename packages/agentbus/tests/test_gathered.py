"""Reads gathered across callers (``agentbus.gathered``): callers of one moment share a read,
callers who come while it runs share the next one, and a failure or a cancellation reaches
only those it concerns."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from agentbus.gathered import Gathered
from hypothesis import given, settings
from hypothesis import strategies as st

A, B = uuid.UUID(int=1), uuid.UUID(int=2)


class Store:
    """A read that records what it was asked and can be held open or made to fail."""

    def __init__(self, rows: dict[tuple[uuid.UUID, str], str]) -> None:
        self.rows = rows
        self.asked: list[tuple[uuid.UUID, list[str]]] = []
        self.gate: asyncio.Event | None = None
        self.fail: Exception | None = None

    async def read(self, tenant_id: uuid.UUID, keys: list[str]) -> dict[str, str]:
        self.asked.append((tenant_id, sorted(keys)))
        if self.gate is not None:
            await self.gate.wait()
        if self.fail is not None:
            raise self.fail
        return {k: self.rows[tenant_id, k] for k in keys if (tenant_id, k) in self.rows}


async def test_callers_of_one_moment_share_one_read() -> None:
    store = Store({(A, "x"): "X", (A, "y"): "Y"})
    gathered = Gathered(store.read)
    got = await asyncio.gather(*(gathered.ask(A, k) for k in ["x", "y", "x", "z"]))
    assert got == ["X", "Y", "X", None]
    assert store.asked == [(A, ["x", "y", "z"])]


async def test_callers_who_come_during_a_read_share_the_next() -> None:
    store = Store({(A, k): k.upper() for k in "abcd"})
    store.gate = asyncio.Event()
    gathered = Gathered(store.read)
    first = asyncio.ensure_future(gathered.ask(A, "a"))
    await asyncio.sleep(0.01)  # the first read is under way and held
    later = [asyncio.ensure_future(gathered.ask(A, k)) for k in "bcda"]
    await asyncio.sleep(0.01)
    assert store.asked == [(A, ["a"])]
    store.gate.set()
    assert await first == "A"
    assert await asyncio.gather(*later) == ["B", "C", "D", "A"]
    assert store.asked == [(A, ["a"]), (A, ["a", "b", "c", "d"])]
    assert gathered.rounds == 2


async def test_each_tenant_is_read_on_its_own() -> None:
    store = Store({(A, "x"): "AX", (B, "x"): "BX"})
    gathered = Gathered(store.read)
    assert await asyncio.gather(gathered.ask(A, "x"), gathered.ask(B, "x")) == ["AX", "BX"]
    assert sorted(store.asked) == [(A, ["x"]), (B, ["x"])]


async def test_a_failed_read_fails_its_callers_only() -> None:
    store = Store({(A, "x"): "X"})
    store.fail = ConnectionError("database away")
    gathered = Gathered(store.read)
    results = await asyncio.gather(
        gathered.ask(A, "x"), gathered.ask(A, "y"), return_exceptions=True
    )
    assert all(isinstance(r, ConnectionError) for r in results)
    store.fail = None
    assert await gathered.ask(A, "x") == "X"  # the next caller reads afresh


async def test_a_cancelled_caller_leaves_the_read_to_the_others() -> None:
    store = Store({(A, "x"): "X"})
    store.gate = asyncio.Event()
    gathered = Gathered(store.read)
    quitter = asyncio.ensure_future(gathered.ask(A, "x"))
    stayer = asyncio.ensure_future(gathered.ask(A, "x"))
    await asyncio.sleep(0.01)
    quitter.cancel()
    await asyncio.sleep(0.01)
    store.gate.set()
    assert await stayer == "X"
    with pytest.raises(asyncio.CancelledError):
        await quitter


@settings(max_examples=60, deadline=None)
@given(
    waves=st.lists(
        st.lists(st.tuples(st.sampled_from([A, B]), st.sampled_from("pqrs")), max_size=8),
        min_size=1,
        max_size=5,
    )
)
def test_every_caller_gets_its_row_in_at_most_one_read_per_wave(
    waves: list[list[tuple[uuid.UUID, str]]],
) -> None:
    """Waves of callers, each wave arriving while the previous one's reads run: everyone gets
    the row of their own key, and no tenant is read more than once per wave plus one."""

    async def run() -> None:
        store = Store({(t, k): f"{t.int}{k}" for t in (A, B) for k in "pq"})
        gathered = Gathered(store.read)
        pending: list[tuple[tuple[uuid.UUID, str], asyncio.Future[str | None]]] = []
        for wave in waves:
            pending += [(ask, asyncio.ensure_future(gathered.ask(*ask))) for ask in wave]
            await asyncio.sleep(0)
        for (tenant, key), future in pending:
            assert await future == store.rows.get((tenant, key))
        for tenant in (A, B):
            reads = [keys for t, keys in store.asked if t == tenant]
            assert len(reads) <= len(waves) + 1
            assert all(len(keys) == len(set(keys)) for keys in reads)

    asyncio.run(run())
