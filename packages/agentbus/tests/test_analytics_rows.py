"""Outbox rows to ClickHouse rows (``agentbus.analytics.rows``): every column of the DDL in its
order, details as a JSON string, exact costs, one row per id whatever the repeats; and a
conversation's events grouped into hops (``analytics.timeline``)."""

from __future__ import annotations

import json
import uuid
from decimal import Decimal

from agentbus.analytics.rows import EVENT_COLUMNS, USAGE_COLUMNS, split
from agentbus.analytics.schema import statements
from agentbus.analytics.timeline import hops
from hypothesis import given
from hypothesis import strategies as st

ids = st.uuids(version=4).map(str)


def _columns(table: str) -> list[str]:
    [ddl] = [
        s for s in statements() if s.startswith(f"CREATE TABLE IF NOT EXISTS agentbus.{table} ")
    ]
    body = ddl.split("(", 1)[1].rsplit(")\nENGINE", 1)[0]
    names = [line.split()[0] for line in body.splitlines() if line.strip()]
    return [n for n in names if n not in ("retention_days", "ingested_at")]


def test_the_columns_are_the_ddls() -> None:
    assert list(EVENT_COLUMNS) == _columns("events")
    assert list(USAGE_COLUMNS) == _columns("usage")


@given(st.lists(st.tuples(st.sampled_from(["events", "usage"]), ids), max_size=30),
       st.integers(1, 3))  # fmt: skip
def test_one_row_per_id_and_the_highest_seq(items: list[tuple[str, str]], repeat: int) -> None:
    queued = []
    for seq, (target, key) in enumerate(items * repeat, start=1):
        row = {"event_id": key, "details": {"a": 1}} if target == "events" else {
            "usage_id": key, "cost_usd": 0.5, "details": {}}  # fmt: skip
        queued.append({"seq": seq, "target": target, "row": json.dumps(row)})
    batch = split(queued)
    assert batch.last_seq == len(queued)
    assert len(batch.events) == len({k for t, k in items if t == "events"})
    assert len(batch.usage) == len({k for t, k in items if t == "usage"})
    assert all(json.loads(e["details"]) == {"a": 1} for e in batch.events)


@given(st.decimals(min_value=0, max_value=Decimal("99999999.999999"), places=6))
def test_costs_stay_exact(cost: Decimal) -> None:
    # PostgreSQL writes the numeric as a JSON number of its own digits
    row = f'{{"usage_id": "{uuid.uuid4()}", "cost_usd": {cost}}}'
    [usage] = split([{"seq": 1, "target": "usage", "row": row}]).usage
    assert Decimal(usage["cost_usd"]) == cost.quantize(Decimal("0.000001"))


def test_a_row_orjson_refuses_is_parsed_all_the_same() -> None:
    text = json.dumps({"usage_id": "u1", "cost_usd": 1, "details": {"tokens": 2**70}})
    [usage] = split([{"seq": 1, "target": "usage", "row": text}]).usage
    assert json.loads(usage["details"]) == {"tokens": 2**70}


@given(st.lists(st.tuples(st.integers(0, 4), st.sampled_from(
    ["message.accepted", "message.published", "message.delivered", "message.read"]),
    st.integers(0, 10_000)), min_size=1, max_size=40))  # fmt: skip
def test_hops_keep_every_event_once_in_time_order(items: list[tuple[int, str, int]]) -> None:
    rows = [{"message_id": f"m{m}", "event": e, "at": str(at), "at_ms": at, "attempt": 1,
             "actor": "gateway", "latency_ms": 1, "error_code": None, "from_agent_id": "a",
             "to_agent_id": "b", "type": "t", "task_id": None, "trace_id": "", "details": "{}"}
            for m, e, at in sorted(items, key=lambda i: i[2])]  # fmt: skip
    found = hops(rows)
    assert found["events"] == sum(len(h["events"]) for h in found["hops"]) == len(rows)
    assert found["messages"] == len({m for m, _e, _at in items})
    assert all(h["gap_ms"] is None or h["gap_ms"] >= 0 for h in found["hops"])
    assert found["duration_ms"] == max(i[2] for i in items) - min(i[2] for i in items)
    assert all(h["timings"]["total"] >= 0 for h in found["hops"])
