"""``z4j bench ingest``: signed event batches over real WebSockets into PostgreSQL.

Each connection plays one agent: hello, then signed ``event_batch`` frames of realistic Celery
events (sent, started, succeeded per task), waiting for each ``event_batch_ack`` before the
next frame, as the agent does. Throughput counts events acknowledged; latency is per batch,
from send to ack. The client shares the machine with the brain, so it encodes every batch
before the clock starts and only signs each frame (a fresh timestamp, nonce and sequence
number around the encoded payload) when it sends it. ``cpu_ms_per_1000_events`` splits the CPU
time of the timed phase between this client, the brain's processes and PostgreSQL's backends.

With ``purge_history`` (``--purge-history N``), the same run is made twice on fresh brains:
once as above, once with N events (on N/3 tasks) received 40 days ago seeded into the agent's
project just before the timed phase, past the default retention, while the brain's retention
controller runs every second (``Z4J_RETENTION_INTERVAL_SECONDS=1``), so it purges that history
while the events arrive. Both results are returned; the second says how much history was
deleted during the timed phase.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import websockets
from wirekit import canonical_json
from z4j_agent.protocol import FrameSigner, FrameVerifier, Session, format_ts, unsigned_frame

from z4j.bench import cpu
from z4j.bench.harness import bench_brain
from z4j.testing import BrainProcess


def make_events(n: int, start: datetime) -> list[dict[str, Any]]:
    events = []
    for i in range(0, n, 3):
        task = str(uuid.uuid4())
        for j, kind in enumerate(("task.sent", "task.started", "task.succeeded")[: n - i]):
            data: dict[str, Any] = {
                "task_name": "app.tasks.process_order",
                "queue": "default",
                "worker": "celery@bench",
                "retry_count": 0,
            }
            if kind == "task.sent":
                data["args"] = [i, f"order-{i}"]
                data["kwargs"] = {"customer": f"c-{i % 1000}", "priority": i % 5}
            if kind == "task.succeeded":
                data["runtime_ms"] = 12.5
                data["result"] = "'ok'"
            events.append(
                {
                    "id": str(uuid.uuid4()),
                    "engine": "celery",
                    "kind": kind,
                    "task_id": task,
                    # a stream of 20,000 events/s: each task 150 us after the one before
                    "occurred_at": format_ts(start + timedelta(microseconds=50 * i + 1000 * j)),
                    "data": data,
                }
            )
    return events


async def _agent(
    server: BrainProcess,
    creds: dict[str, Any],
    payloads: list[bytes],
    latencies: list[float],
) -> int:
    url = f"ws://127.0.0.1:{server.port}/ws/agent"
    async with websockets.connect(
        url, additional_headers={"Authorization": f"Bearer {creds['token']}"}, max_size=2**22
    ) as ws:
        await ws.send(
            json.dumps(
                unsigned_frame(
                    "hello",
                    {
                        "protocol_version": "2",
                        "agent_version": "bench",
                        "framework": "celery",
                        "engines": ["celery"],
                        "worker_id": str(uuid.uuid4()),
                    },
                )
            )
        )
        ack = json.loads(await ws.recv())["payload"]
        session = Session(creds["secret"], ack["agent_id"], ack["project_id"], ack["session_id"])
        signer, verifier = FrameSigner(session), FrameVerifier(session)
        accepted = 0
        for payload in payloads:
            began = time.perf_counter()
            await ws.send(signer.sign_encoded("event_batch", payload).decode())
            reply = verifier.verify(json.loads(await ws.recv()))
            latencies.append(time.perf_counter() - began)
            accepted += reply["payload"]["accepted"]
        return accepted


async def _cpu_seconds(server: BrainProcess) -> dict[str, dict[int, float]]:
    """CPU used so far by the client, the server's processes and the database's backends."""
    assert server.proc is not None
    async with await psycopg.AsyncConnection.connect(server.admin_url, autocommit=True) as conn:
        cur = await conn.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database()"
            " AND pid <> pg_backend_pid()"
        )
        backends = [row[0] for row in await cur.fetchall()]
    return {
        "client": cpu.client_seconds(),
        "server": cpu.process_seconds(cpu.descendants(server.proc.pid)),
        "postgres": cpu.process_seconds(backends),
    }


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else 0.0


async def _seed_history(server: BrainProcess, project_id: str, events: int) -> None:
    """``events`` events, three per task, received 40 days ago (one transaction)."""
    async with await psycopg.AsyncConnection.connect(server.admin_url) as conn:
        await conn.execute(
            "INSERT INTO tasks (id, project_id, engine, name, state, created_at, updated_at)"
            " SELECT gen_random_uuid(), %(p)s, 'celery', 'app.tasks.old', 'succeeded',"
            " now() - interval '40 days' + i * interval '1 ms',"
            " now() - interval '40 days' + i * interval '1 ms'"
            " FROM generate_series(1, %(n)s) i",
            {"p": project_id, "n": max(1, events // 3)},
        )
        await conn.execute(
            "INSERT INTO events (id, task_id, project_id, event_type, ts, created_at)"
            " SELECT gen_random_uuid(), t.id, t.project_id, k, t.created_at, t.created_at"
            " FROM tasks t, unnest(ARRAY['task_sent', 'started', 'succeeded']) k"
            " WHERE t.project_id = %(p)s AND t.name = 'app.tasks.old'",
            {"p": project_id},
        )


async def _history_left(server: BrainProcess) -> int:
    async with await psycopg.AsyncConnection.connect(server.admin_url) as conn:
        cur = await conn.execute(
            "SELECT (SELECT count(*) FROM tasks WHERE name = 'app.tasks.old')"
            " + (SELECT count(*) FROM events WHERE created_at < now() - interval '30 days')"
        )
        row = await cur.fetchone()
        return int(row[0]) if row else 0


async def run(
    events: int,
    batch: int,
    connections: int,
    workers: int,
    database_url: str | None,
    purge_history: int = 0,
) -> list[dict[str, Any]]:
    results = [await _run(events, batch, connections, workers, database_url, 0)]
    if purge_history:
        results.append(await _run(events, batch, connections, workers, database_url, purge_history))
    return results


async def _run(
    events: int,
    batch: int,
    connections: int,
    workers: int,
    database_url: str | None,
    purge_history: int,
) -> dict[str, Any]:
    env = {"Z4J_RETENTION_INTERVAL_SECONDS": "1"} if purge_history else {}
    history: dict[str, int] = {}
    async with bench_brain(database_url, workers, env) as server:
        creds = await server.new_agent("bench")
        per_conn = events // connections
        plans = []
        start = datetime.now(UTC)
        for _ in range(connections):
            evs = make_events(per_conn, start)
            plans.append(
                [canonical_json({"events": evs[i : i + batch]}) for i in range(0, len(evs), batch)]
            )
        # Warm up one batch per connection so connection setup is not measured.
        latencies: list[float] = []
        await asyncio.gather(*(_agent(server, creds, [p[0]], []) for p in plans))
        if purge_history:
            await _seed_history(server, creds["project_id"], purge_history)
            history["seeded_rows"] = await _history_left(server)
        cpu_before = await _cpu_seconds(server) if cpu.available() else None
        began = time.perf_counter()
        counts = await asyncio.gather(*(_agent(server, creds, p[1:], latencies) for p in plans))
        elapsed = time.perf_counter() - began
        cpu_after = await _cpu_seconds(server) if cpu.available() else None
        if purge_history:
            left = await _history_left(server)
            history["purged_during_ingest"] = history["seeded_rows"] - left
            history["left_after_ingest"] = left
    total = sum(counts)
    cpu_ms = (
        {
            side: round(cpu.used_between(cpu_before[side], used) * 1e6 / max(total, 1), 1)
            for side, used in cpu_after.items()
        }
        if cpu_before is not None and cpu_after is not None
        else None
    )
    return {
        "benchmark": "z4j.ingest",
        "events": total,
        "batch_size": batch,
        "connections": connections,
        "workers": workers,
        "seconds": round(elapsed, 3),
        "events_per_sec": round(total / elapsed, 1),
        "p50_batch_ms": round(_percentile(latencies, 0.5) * 1000, 2),
        "p99_batch_ms": round(_percentile(latencies, 0.99) * 1000, 2),
        "cpu_ms_per_1000_events": cpu_ms,
        "unit": "events/s",
        "path": "signed frames over WebSocket -> PostgreSQL",
        "purge": history or None,
    }
