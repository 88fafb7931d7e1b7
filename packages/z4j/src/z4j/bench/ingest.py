"""``z4j bench ingest``: signed event batches over real WebSockets into PostgreSQL.

Each connection plays one agent: hello, then signed ``event_batch`` frames of realistic Celery
events (sent, started, succeeded per task), waiting for each ``event_batch_ack`` before the
next frame, as the agent does. Throughput counts events acknowledged; latency is per batch,
from send to ack.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import websockets
from z4j_agent.protocol import FrameSigner, FrameVerifier, Session, format_ts, unsigned_frame

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
                    "occurred_at": format_ts(start + timedelta(milliseconds=j)),
                    "data": data,
                }
            )
    return events


async def _agent(
    server: BrainProcess,
    creds: dict[str, Any],
    frames: list[list[dict[str, Any]]],
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
        for events in frames:
            frame = signer.sign("event_batch", {"events": events})
            began = time.perf_counter()
            await ws.send(json.dumps(frame))
            reply = verifier.verify(json.loads(await ws.recv()))
            latencies.append(time.perf_counter() - began)
            accepted += reply["payload"]["accepted"]
        return accepted


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else 0.0


async def run(
    events: int, batch: int, connections: int, workers: int, database_url: str | None
) -> dict[str, Any]:
    async with bench_brain(database_url, workers) as server:
        creds = await server.new_agent("bench")
        per_conn = events // connections
        plans = []
        start = datetime.now(UTC)
        for _ in range(connections):
            evs = make_events(per_conn, start)
            plans.append([evs[i : i + batch] for i in range(0, len(evs), batch)])
        # Warm up one batch per connection so connection setup is not measured.
        latencies: list[float] = []
        await asyncio.gather(*(_agent(server, creds, [p[0]], []) for p in plans))
        began = time.perf_counter()
        counts = await asyncio.gather(*(_agent(server, creds, p[1:], latencies) for p in plans))
        elapsed = time.perf_counter() - began
    total = sum(counts)
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
        "unit": "events/s",
        "path": "signed frames over WebSocket -> PostgreSQL",
    }
