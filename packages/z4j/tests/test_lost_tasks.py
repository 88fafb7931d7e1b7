"""Lost tasks through a real brain and the agent channel: a started task whose worker goes
silent past the grace period becomes lost, with a timeline row; the worker reporting it active
again puts it back to started; a later real event wins over lost; a worker that keeps its
heartbeats keeps its tasks."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest
import websockets
from platformkit.testing.services import free_port
from psycopg.rows import dict_row
from websockets.asyncio.client import ClientConnection
from z4j.testing import BrainProcess, wait_for
from z4j_agent.protocol import FrameSigner, FrameVerifier, Session, format_ts, unsigned_frame

GRACE = 3
HELLO = {
    "protocol_version": "2",
    "agent_version": "test",
    "framework": "celery",
    "engines": ["celery"],
    "schedulers": [],
    "capabilities": {"celery": []},
    "host": {"hostname": "h1"},
    "worker_role": "task",
    "worker_pid": 1,
}


async def connect(server: BrainProcess, token: str) -> ClientConnection:
    return await websockets.connect(
        f"ws://127.0.0.1:{server.port}/ws/agent",
        additional_headers={"Authorization": f"Bearer {token}"},
    )


def event(kind: str, task: str, at: datetime, **data: Any) -> dict[str, Any]:
    return {
        "id": str(uuid.uuid4()),
        "engine": "celery",
        "kind": kind,
        "task_id": task,
        "occurred_at": format_ts(at),
        "data": {"task_name": "app.add", **data},
    }


@pytest.fixture
def quick_brain(
    brain_database: str, brain_config_dir: Path, tmp_path: Path
) -> Iterator[BrainProcess]:
    server = BrainProcess(
        brain_database,
        brain_config_dir,
        free_port(),
        tmp_path / "brain.log",
        env={"Z4J_LOST_AFTER_SECONDS": str(GRACE), "Z4J_LOST_SWEEP_SECONDS": "0.5"},
    )
    server.start()
    yield server
    server.stop()


class Worker:
    """One worker connection of an agent, speaking the protocol by hand."""

    def __init__(self, ws: ClientConnection, signer: FrameSigner, verifier: FrameVerifier):
        self.ws, self.signer, self.verifier = ws, signer, verifier

    @classmethod
    async def open(
        cls, server: BrainProcess, creds: dict[str, Any], worker_id: str, **extra: Any
    ) -> Worker:
        ws = await connect(server, creds["token"])
        await ws.send(
            json.dumps(unsigned_frame("hello", {**HELLO, "worker_id": worker_id, **extra}))
        )
        p = json.loads(await ws.recv())["payload"]
        session = Session(creds["secret"], p["agent_id"], p["project_id"], p["session_id"])
        return cls(ws, FrameSigner(session), FrameVerifier(session))

    async def send(self, *events: dict[str, Any]) -> None:
        await self.ws.send(json.dumps(self.signer.sign("event_batch", {"events": list(events)})))
        ack = self.verifier.verify(json.loads(await self.ws.recv()))
        assert ack["payload"]["accepted"] == len(events)

    async def heartbeat(self, **extra: Any) -> None:
        payload = {"buffer_size": 0, "dropped_events": 0, "adapter_health": {}, **extra}
        await self.ws.send(json.dumps(self.signer.sign("heartbeat", payload)))


def rows(server: BrainProcess, sql: str, *params: Any) -> list[dict[str, Any]]:
    with psycopg.connect(server.admin_url, row_factory=dict_row) as conn:
        return conn.execute(sql, params).fetchall()


def state_of(server: BrainProcess, task: str) -> str | None:
    found = rows(server, "SELECT state::text FROM tasks WHERE engine_task_id = %s", task)
    return found[0]["state"] if found else None


async def becomes(server: BrainProcess, task: str, state: str, within: float = 60) -> None:
    async def reached() -> bool:
        return state_of(server, task) == state

    assert await wait_for(reached, within=within, interval=0.2), (
        f"{task} is {state_of(server, task)}, not {state}:\n{server.log_path.read_text()[-3000:]}"
    )


def timeline(server: BrainProcess, task: str) -> list[dict[str, Any]]:
    return rows(
        server,
        "SELECT e.event_type, e.payload FROM events e JOIN tasks t ON t.id = e.task_id "
        "WHERE t.engine_task_id = %s ORDER BY e.ts, e.created_at",
        task,
    )


async def test_silent_worker_loses_its_task_and_finds_it_again(quick_brain: BrainProcess) -> None:
    creds = await quick_brain.new_agent()
    task = f"t-{uuid.uuid4().hex[:8]}"
    now = datetime.now(UTC)
    worker = await Worker.open(quick_brain, creds, "celery@a")
    await worker.send(
        event("task.sent", task, now), event("task.started", task, now, worker="celery@a")
    )
    await worker.ws.close()

    await becomes(quick_brain, task, "lost")
    lost = timeline(quick_brain, task)[-1]
    assert lost["event_type"] == "lost"
    assert "silent" in lost["payload"]["reason"]
    assert lost["payload"]["worker"] == "celery@a"
    assert rows(quick_brain, "SELECT finished_at FROM tasks WHERE engine_task_id = %s", task)[0][
        "finished_at"
    ]

    # The worker comes back still running it: started again, with a row saying why.
    back = await Worker.open(quick_brain, creds, "celery@a", active_tasks=[task, "other"])
    assert state_of(quick_brain, task) == "started"
    found = timeline(quick_brain, task)[-1]
    assert found["event_type"] == "started"
    assert found["payload"]["source"] == "brain"
    assert (
        rows(quick_brain, "SELECT finished_at FROM tasks WHERE engine_task_id = %s", task)[0][
            "finished_at"
        ]
        is None
    )

    # Its heartbeats keep it started past the grace period; then it finishes, for real.
    for _ in range(2 * GRACE):
        await back.heartbeat(active_tasks=[task])
        await wait_for(_never, within=0.5)
    assert state_of(quick_brain, task) == "started"
    await back.send(event("task.succeeded", task, now + timedelta(seconds=5), runtime_ms=1.0))
    assert state_of(quick_brain, task) == "succeeded"
    await back.ws.close()


async def test_a_late_real_event_wins_over_lost(quick_brain: BrainProcess) -> None:
    creds = await quick_brain.new_agent()
    task = f"t-{uuid.uuid4().hex[:8]}"
    now = datetime.now(UTC)
    worker = await Worker.open(quick_brain, creds, "celery@b")
    await worker.send(event("task.started", task, now))
    await worker.ws.close()
    await becomes(quick_brain, task, "lost")
    # A worker that reports no active tasks (z4j-celery) flushes the finish it had buffered.
    again = await Worker.open(quick_brain, creds, "celery@b")
    assert state_of(quick_brain, task) == "lost"
    await again.send(
        event("task.failed", task, now + timedelta(seconds=1), exception="ValueError: x"),
        event("task.started", task, now),  # a duplicate start changes nothing
    )
    assert state_of(quick_brain, task) == "failed"
    await again.ws.close()


async def test_only_the_silent_workers_tasks_are_lost(quick_brain: BrainProcess) -> None:
    creds = await quick_brain.new_agent()
    now = datetime.now(UTC)
    alive = await Worker.open(quick_brain, creds, "celery@alive")
    dead = await Worker.open(quick_brain, creds, "celery@dead")
    await alive.send(event("task.started", "on-alive", now))
    await dead.send(event("task.started", "on-dead", now))
    await dead.ws.close()
    for _ in range(GRACE * 2 + 4):
        await alive.heartbeat()
        if state_of(quick_brain, "on-dead") == "lost":
            break
        await wait_for(_never, within=0.5)
    assert state_of(quick_brain, "on-dead") == "lost"
    assert state_of(quick_brain, "on-alive") == "started"
    await alive.ws.close()


async def _never() -> bool:
    return False


async def test_a_worker_restarted_under_its_name_loses_what_it_no_longer_runs(
    quick_brain: BrainProcess,
) -> None:
    creds = await quick_brain.new_agent()
    now = datetime.now(UTC)
    first = await Worker.open(quick_brain, creds, "celery@same", active_tasks=[])
    await first.send(event("task.started", "was-running", now))
    await first.ws.close()
    # Killed and started again at once: the same name speaks again, running nothing.
    again = await Worker.open(quick_brain, creds, "celery@same", active_tasks=[])
    for _ in range(4 * GRACE + 20):
        await again.heartbeat(active_tasks=[])
        if state_of(quick_brain, "was-running") == "lost":
            break
        await wait_for(_never, within=0.5)
    assert state_of(quick_brain, "was-running") == "lost"
    assert "no longer lists it" in timeline(quick_brain, "was-running")[-1]["payload"]["reason"]
    await again.ws.close()
