"""The Elastic Agent check-in gate (rounds at once, 503 beyond the queue, woken check-ins after
arrivals, held check-ins woken by their own notice) and the simulator's back-off, Elastic
Agent's equal jitter."""

from __future__ import annotations

import asyncio
import random
from uuid import UUID, uuid4

import pytest
from hypothesis import given
from hypothesis import strategies as st
from strataplane.agents.checkin_gate import Busy, CheckinGate
from strataplane.simulate.elastic import EqualJitter

T = UUID(int=1)


async def test_no_more_rounds_run_than_the_bound() -> None:
    gate = CheckinGate(rounds=3, queue=100)
    running = peak = 0

    async def round_() -> None:
        nonlocal running, peak
        async with gate.arrival():
            running += 1
            peak = max(peak, running)
            await asyncio.sleep(0.01)
            running -= 1

    await asyncio.gather(*(round_() for _ in range(40)))
    assert peak == 3
    assert gate.waiting == 0


async def test_arrivals_beyond_the_queue_are_refused_with_retry_after() -> None:
    gate = CheckinGate(rounds=1, queue=2)
    release = asyncio.Event()

    async def round_() -> None:
        async with gate.arrival():
            await release.wait()

    tasks = [asyncio.create_task(round_()) for _ in range(3)]  # 1 running, 2 waiting
    await asyncio.sleep(0)
    assert gate.waiting == 2
    with pytest.raises(Busy) as refused:
        async with gate.arrival():
            pass
    assert refused.value.status == 503
    assert int(refused.value.headers["Retry-After"]) >= 1
    async with asyncio.timeout(5):  # a woken check-in is never refused: it waits its turn
        woken = asyncio.create_task(_woken(gate))
        release.set()
        await asyncio.gather(*tasks, woken)
    assert gate.refused == 1


async def _woken(gate: CheckinGate, order: list[str] | None = None) -> None:
    async with gate.woken():
        if order is not None:
            order.append("woken")


async def test_arrivals_go_before_woken_check_ins() -> None:
    gate = CheckinGate(rounds=1, queue=10)
    order: list[str] = []
    release = asyncio.Event()

    async def first() -> None:
        async with gate.arrival():
            await release.wait()

    async def arrival() -> None:
        async with gate.arrival():
            order.append("arrival")

    head = asyncio.create_task(first())
    await asyncio.sleep(0)
    woken = [asyncio.create_task(_woken(gate, order)) for _ in range(2)]
    await asyncio.sleep(0)
    arrivals = [asyncio.create_task(arrival()) for _ in range(2)]
    await asyncio.sleep(0)
    release.set()
    await asyncio.gather(head, *woken, *arrivals)
    assert order == ["arrival", "arrival", "woken", "woken"]


async def test_acknowledgements_go_first_and_are_not_crowded_out_by_check_ins() -> None:
    gate = CheckinGate(rounds=1, queue=2)
    order: list[str] = []
    release = asyncio.Event()

    async def first() -> None:
        async with gate.arrival():
            await release.wait()

    async def line(kind: str) -> None:
        async with gate.acknowledgement() if kind == "ack" else gate.arrival():
            order.append(kind)

    head = asyncio.create_task(first())
    await asyncio.sleep(0)
    woken = asyncio.create_task(_woken(gate, order))
    arrival = asyncio.create_task(line("arrival"))
    await asyncio.sleep(0)
    with pytest.raises(Busy):  # the queue is full for check-ins...
        async with gate.arrival():
            pass
    acks = [asyncio.create_task(line("ack")) for _ in range(2)]  # ...not for acknowledgements
    await asyncio.sleep(0)
    with pytest.raises(Busy):  # until their own line is full
        async with gate.acknowledgement():
            pass
    release.set()
    async with asyncio.timeout(5):
        await asyncio.gather(head, woken, arrival, *acks)
    assert order == ["ack", "ack", "arrival", "woken"]
    assert gate.refused == 2


async def test_a_cancelled_waiter_passes_its_turn_on() -> None:
    gate = CheckinGate(rounds=1, queue=10)
    release = asyncio.Event()

    async def holder() -> None:
        async with gate.arrival():
            await release.wait()

    head = asyncio.create_task(holder())
    await asyncio.sleep(0)
    gone = asyncio.create_task(_woken(gate))
    after = asyncio.create_task(_woken(gate))
    await asyncio.sleep(0)
    gone.cancel()
    release.set()
    async with asyncio.timeout(5):
        await asyncio.gather(head, after)
    assert gone.cancelled()
    assert gate.waiting == 0
    async with gate.arrival():  # the slot came back
        pass


async def test_held_check_ins_wake_on_their_own_notice() -> None:
    gate = CheckinGate(rounds=1, queue=0)
    ids = sorted(uuid4() for _ in range(3))
    other = UUID(int=2)
    with (
        gate.hold(T, ids[0]) as a,
        gate.hold(T, ids[1]) as b,
        gate.hold(T, ids[2]) as c,
        gate.hold(other, uuid4()) as d,
    ):
        assert gate.held == 4
        gate.wake_agent(T, ids[1])
        assert [h.event.is_set() for h in (a, b, c, d)] == [False, True, False, False]
        assert b.direct
        assert await b.wait(5)
        assert not b.event.is_set()
        gate.wake_range(T, ids[0], ids[1])
        assert [h.event.is_set() for h in (a, b, c, d)] == [True, True, False, False]
        assert not a.direct
        gate.wake_tenant(other)
        assert d.event.is_set()
        gate.wake_agent(other, ids[2])  # another tenant's notice never wakes it
        assert not c.event.is_set()
        assert not await c.wait(0.01)
    assert gate.held == 0


@given(
    init=st.floats(0.1, 100),
    factor=st.floats(1, 20),
    seed=st.integers(0, 2**32),
    failures=st.integers(1, 30),
)
def test_equal_jitter_waits_as_elastic_agent(
    init: float, factor: float, seed: int, failures: int
) -> None:
    bo = EqualJitter(init, init * factor, rand=random.Random(seed))
    waits = [bo.next_wait() for _ in range(failures)]
    assert init <= waits[0] <= 2 * init  # the first wait: at least init, with jitter
    for wait in waits:
        assert min(init, init * factor / 2) <= wait <= 1.5 * max(init * factor, 2 * init) + 1e-9
    bo.reset()
    assert init <= bo.next_wait() <= 2 * init
