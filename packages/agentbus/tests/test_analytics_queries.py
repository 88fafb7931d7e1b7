"""The analytics queries on a seeded history with known answers: in chDB always, and in a
ClickHouse server when ``AGENTBUS_TEST_CLICKHOUSE_URL`` names one. Two tenants hold look-alike
rows (the same conversation id, the same agents' ids) so that any query that forgot its tenant
would answer with the other's numbers."""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from agentbus.analytics import queries, reads
from agentbus.analytics.backends import Backend, ChdbBackend, ServerBackend
from agentbus.analytics.store import apply_schema
from agentbus.errors import RequestInvalid
from hypothesis import given, settings
from hypothesis import strategies as st

SERVER_URL = os.environ.get("AGENTBUS_TEST_CLICKHOUSE_URL")
DAY1 = (datetime.now(UTC) - timedelta(days=2)).replace(hour=10, minute=0, second=0, microsecond=0)
DAY2 = DAY1 + timedelta(days=1)
SINCE, UNTIL = DAY1 - timedelta(days=1), DAY2 + timedelta(days=1)


class History:
    def __init__(self) -> None:
        self.a, self.b = uuid.uuid4(), uuid.uuid4()
        self.ws, self.cnv, self.task = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
        self.alice, self.bob, self.carol = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
        self.m1, self.m2, self.m3 = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()


def _ts(at: datetime) -> str:
    return at.strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


def _event(
    h: History,
    tenant: uuid.UUID,
    msg: uuid.UUID,
    src: uuid.UUID,
    dst: uuid.UUID,
    event: str,
    at: datetime,
    latency: int | None,
    size: int = 100,
) -> dict[str, Any]:
    return {"event_id": str(uuid.uuid4()), "event_time": _ts(at), "event": event,
            "tenant_id": str(tenant), "workspace_id": str(h.ws), "message_id": str(msg),
            "conversation_id": str(h.cnv), "task_id": None, "trace_id": "t" * 32,
            "span_id": "s" * 16, "from_agent_id": str(src), "to_agent_id": str(dst),
            "type": "agentbus.message.v1", "capability": None, "attempt": 1, "actor": "gateway",
            "payload_bytes": size, "latency_ms": latency, "error_code": None, "policy_id": None,
            "bridged_from": None, "details": "{}"}  # fmt: skip


def _usage(
    h: History,
    tenant: uuid.UUID,
    agent: uuid.UUID,
    at: datetime,
    model: str,
    cost: str,
    reported_by: str = "harness",
    task: uuid.UUID | None = None,
    tokens: int = 1000,
) -> dict[str, Any]:
    return {"usage_id": str(uuid.uuid4()), "recorded_at": _ts(at), "tenant_id": str(tenant),
            "workspace_id": str(h.ws), "agent_id": str(agent),
            "task_id": None if task is None else str(task), "message_id": None,
            "conversation_id": None, "harness": "claude", "provider": "anthropic",
            "model": model, "input_tokens": tokens, "output_tokens": 10, "cache_read_tokens": 0,
            "cache_write_tokens": 0, "reasoning_tokens": 0, "cost_usd": cost,
            "cost_source": "computed", "reported_by": reported_by, "confidence": "exact",
            "bus_bytes_in": 0, "bus_bytes_out": 0, "bus_messages": 1, "duration_ms": None,
            "details": "{}"}  # fmt: skip


def _steps(
    h: History,
    tenant: uuid.UUID,
    msg: uuid.UUID,
    src: uuid.UUID,
    dst: uuid.UUID,
    at: datetime,
    lat: tuple[int, int, int | None, int | None],
) -> list[dict[str, Any]]:
    ms = timedelta(milliseconds=1)
    out = [
        _event(h, tenant, msg, src, dst, "message.accepted", at, lat[0]),
        _event(h, tenant, msg, src, dst, "message.published", at + lat[1] * ms, lat[1]),
    ]
    if lat[2] is None:
        out.append(_event(h, tenant, msg, src, dst, "message.dead_lettered", at + 50 * ms, 50))
        return out
    delivered = at + lat[2] * ms
    out.append(_event(h, tenant, msg, src, dst, "message.delivered", delivered, lat[2]))
    if lat[3] is not None:
        out.append(_event(h, tenant, msg, src, dst, "message.read", delivered + lat[3] * ms,
                          lat[3]))  # fmt: skip
    return out


async def seed(backend: Backend, h: History) -> None:
    now = _ts(datetime.now(UTC))
    kept = [{"tenant_id": str(t), "retention_days": 90, "updated_at": now} for t in (h.a, h.b)]
    await backend.insert("agentbus.tenant_retention_source", kept)
    await backend.command("SYSTEM RELOAD DICTIONARY agentbus.tenant_retention")
    s = timedelta(seconds=1)
    events = [
        *_steps(h, h.a, h.m1, h.alice, h.bob, DAY1, (10, 5, 100, 1000)),
        *_steps(h, h.a, h.m2, h.bob, h.alice, DAY1 + 2 * s, (20, 6, 200, 2000)),
        *_steps(h, h.a, h.m3, h.alice, h.carol, DAY1 + 3 * s, (30, 7, None, None)),
        # tenant b: the same conversation and agents, other numbers
        *_steps(h, h.b, uuid.uuid4(), h.alice, h.bob, DAY1, (9000, 9000, 9000, 9000)),
        *_steps(h, h.b, uuid.uuid4(), h.carol, h.alice, DAY1, (9000, 9000, None, None)),
    ]
    await backend.insert("agentbus.events", events)
    await backend.insert("agentbus.usage", [
        _usage(h, h.a, h.alice, DAY1, "claude-sonnet-4-5", "1.500000", task=h.task),
        _usage(h, h.a, h.alice, DAY2, "gpt-5", "0.250000", reported_by="estimate"),
        _usage(h, h.a, h.bob, DAY1 + s, "claude-sonnet-4-5", "2.000000", task=h.task),
        _usage(h, h.b, h.alice, DAY1, "claude-sonnet-4-5", "99.000000", task=h.task),
    ])  # fmt: skip


def _backends() -> list[Any]:
    why = ("no ClickHouse server configured: set AGENTBUS_TEST_CLICKHOUSE_URL (a "
           "clickhouse-connect DSN) to run these against one")  # fmt: skip
    server = pytest.param("server", marks=pytest.mark.skipif(SERVER_URL is None, reason=why))
    return ["chdb", server]


@pytest.fixture(scope="module", params=_backends())
async def seeded(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[tuple[Backend, History]]:
    if request.param == "chdb":
        backend: Backend = ChdbBackend(Path(tmp_path_factory.mktemp("chdb")))
    else:
        assert SERVER_URL is not None
        backend = ServerBackend(SERVER_URL)
    await apply_schema(backend)
    history = History()
    await seed(backend, history)
    yield backend, history
    await backend.close()


async def test_a_conversations_trace_has_its_hops_and_timings(
    seeded: tuple[Backend, History],
) -> None:
    backend, h = seeded
    trace = await queries.conversation_trace(backend, h.a, h.cnv)
    assert trace is not None
    assert trace["messages"] == 3
    assert trace["events"] == 11
    assert [hop["message_id"] for hop in trace["hops"]] == [str(h.m1), str(h.m2), str(h.m3)]
    assert [hop["gap_ms"] for hop in trace["hops"]] == [None, 2000, 1000]
    first, second, third = trace["hops"]
    assert first["timings"] == {"accept": 10, "publish": 5, "deliver": 100, "read": 1000,
                                "total": 1100}  # fmt: skip
    assert second["timings"]["read"] == 2000
    assert [e["event"] for e in third["events"]] == [
        "message.accepted", "message.published", "message.dead_lettered"]  # fmt: skip
    assert trace["duration_ms"] == 2200 + 2000  # m2 read at +2 s +200 ms +2000 ms
    assert {hop["from_agent_id"] for hop in trace["hops"]} == {str(h.alice), str(h.bob)}
    assert await queries.conversation_trace(backend, uuid.uuid4(), h.cnv) is None


@pytest.mark.parametrize(("by", "expected"), [
    ("agent", "bob harness 2.000000; alice harness 1.500000; alice estimate 0.250000"),
    ("model", "claude-sonnet-4-5 harness 3.500000; gpt-5 estimate 0.250000"),
    ("task", "task harness 3.500000"),
    ("day", "day1 harness 3.500000; day2 estimate 0.250000"),
])  # fmt: skip
async def test_cost_per_agent_model_task_and_day(
    seeded: tuple[Backend, History], by: str, expected: str
) -> None:
    backend, h = seeded
    names = {str(h.alice): "alice", str(h.bob): "bob", str(h.task): "task",
             str(DAY1.date()): "day1", str(DAY2.date()): "day2"}  # fmt: skip
    rows = await queries.cost(backend, h.a, by, SINCE, UNTIL)
    got = "; ".join(
        f"{names.get(r['key'], r['key'])} {r['reported_by']} "
        f"{Decimal(r['cost_usd']).quantize(Decimal('0.000001'))}"
        for r in rows
    )
    assert got == expected
    assert await queries.cost(backend, uuid.uuid4(), by, SINCE, UNTIL) == []


async def test_who_talks_to_whom(seeded: tuple[Backend, History]) -> None:
    backend, h = seeded
    graph = await queries.talk_graph(backend, h.a, SINCE, UNTIL)
    edges = {(e["source"], e["target"]): e for e in graph["edges"]}
    assert set(edges) == {(str(h.alice), str(h.bob)), (str(h.bob), str(h.alice)),
                          (str(h.alice), str(h.carol))}  # fmt: skip
    assert edges[(str(h.alice), str(h.bob))]["messages"] == 1
    assert edges[(str(h.alice), str(h.carol))]["dead_lettered"] == 1
    assert edges[(str(h.alice), str(h.carol))]["messages"] == 1
    nodes = {n["id"]: n for n in graph["nodes"]}
    assert nodes[str(h.alice)] == {"id": str(h.alice), "sent": 2, "received": 1}
    empty = await queries.talk_graph(backend, uuid.uuid4(), SINCE, UNTIL)
    assert empty == {"nodes": [], "edges": []}


async def test_latency_per_stage_against_the_slo(seeded: tuple[Backend, History]) -> None:
    backend, h = seeded
    stages = {s["stage"]: s for s in await queries.latency(backend, h.a, SINCE, UNTIL, 25)}
    assert [stages[s]["count"] for s in queries.STAGES] == [3, 3, 2, 2]
    accept = stages["accept"]
    # nearest rank over [10, 20, 30]: p50 the 2nd, p95 and p99 the 3rd
    assert (accept["p50_ms"], accept["p95_ms"], accept["p99_ms"]) == (20, 30, 30)
    assert accept["within_slo"] == round(2 / 3, 4)
    assert accept["meets_slo"] is False
    assert stages["publish"]["meets_slo"] is True
    assert stages["deliver"]["p95_ms"] == 200
    assert stages["read"]["p50_ms"] == 2000
    nobody = await queries.latency(backend, uuid.uuid4(), SINCE, UNTIL, 25)
    assert {s["count"] for s in nobody} == {0}


def test_the_history_is_json() -> None:
    h = History()
    assert json.loads(json.dumps(_event(h, h.a, h.m1, h.alice, h.bob, "x", DAY1, 1)))


@settings(max_examples=300)
@given(
    since=st.one_of(st.none(), st.datetimes(timezones=st.just(UTC))),
    until=st.one_of(st.none(), st.datetimes(timezones=st.just(UTC))),
)
def test_a_window_is_refused_or_lies_where_clickhouse_can_hold_it(
    since: datetime | None, until: datetime | None
) -> None:
    try:
        lo, hi = reads.window(since, until)
    except RequestInvalid:
        return
    assert reads.EARLIEST <= lo < hi <= reads.LATEST
    for bound in (lo, hi):
        text = queries._ts(bound)
        assert len(text) == 23
        assert datetime.fromisoformat(text + "+00:00") <= bound


def test_a_window_in_the_first_century_is_refused_not_sent() -> None:
    with pytest.raises(RequestInvalid):
        reads.window(datetime(68, 2, 29, 18, 43, 50, tzinfo=UTC), None)
    with pytest.raises(RequestInvalid):
        reads.window(None, datetime(1, 1, 1, 0, 0, 1, tzinfo=UTC))
