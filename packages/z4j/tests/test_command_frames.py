"""The command frames on the wire, against a real brain: a client speaking protocol v2 takes a
command, and answers it with what a broken or hostile agent might send. The brain stores what
it can, never drops the connection for it, and ignores answers that name no open command."""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

import httpx
import psycopg
from psycopg.rows import dict_row
from z4j.testing import BrainProcess, wait_for

from .command_stack import ADMIN_EMAIL, ADMIN_PASSWORD, create_admin
from .test_agent_protocol import HELLO, handshake


def _row(url: str, query: str, *args: Any) -> dict[str, Any] | None:
    with psycopg.connect(url, row_factory=dict_row) as conn:
        return conn.execute(query, args).fetchone()


async def test_hostile_results_are_stored_safely_and_stray_ones_ignored(
    brain_server: BrainProcess,
) -> None:
    await create_admin(brain_server)
    creds = await brain_server.new_agent("frames")
    task_id = uuid.uuid4()
    with psycopg.connect(brain_server.admin_url) as conn:
        conn.execute(
            "INSERT INTO tasks (id, project_id, agent_id, engine, engine_task_id, name, state) "
            "VALUES (%s, %s, %s, 'celery', 'e-1', 'app.x', 'started')",
            (task_id, creds["project_id"], creds["agent_id"]),
        )
    ws, signer, verifier = await handshake(brain_server, creds)
    assert "cancel_task" not in HELLO["capabilities"]["celery"]
    with psycopg.connect(brain_server.admin_url) as conn:  # as a hello advertising it would
        conn.execute(
            'UPDATE agents SET capabilities = \'{"celery": ["cancel_task"]}\' WHERE id = %s',
            (creds["agent_id"],),
        )
    try:
        async with httpx.AsyncClient(base_url=f"{brain_server.url}/api/v1") as api:
            login = {"email": ADMIN_EMAIL, "password": ADMIN_PASSWORD}
            assert (await api.post("/auth/login", json=login)).status_code == 200
            path = f"/projects/{creds['project_id']}/tasks/{task_id}/cancel"
            issued = (await api.post(path, json={"terminate": True})).json()

            frame = verifier.verify(json.loads(await asyncio.wait_for(ws.recv(), 30)))
            assert frame["type"] == "command"
            assert frame["id"] == issued["id"]
            payload = frame["payload"]
            assert payload["action"] == "cancel_task"
            assert payload["target"] == {"task_id": "e-1", "engine": "celery"}
            assert payload["parameters"]["terminate"] is True

            await ws.send(json.dumps(signer.sign("command_ack", {}, frame_id=frame["id"])))
            hostile = {"status": "success", "error": "bad\u0000byte",
                       "result": {"k\u0000": "v", "n": 2**70}}  # fmt: skip
            await ws.send(json.dumps(signer.sign("command_result", hostile, frame_id=frame["id"])))
            # Answers naming nothing open: an unknown id, a second result.
            stray = {"status": "failed", "error": "late"}
            await ws.send(json.dumps(signer.sign("command_result", stray, frame_id="not-a-uuid")))
            await ws.send(json.dumps(signer.sign("command_result", stray, frame_id=frame["id"])))
            await ws.send(json.dumps(signer.sign("heartbeat", {"buffer_size": 0})))

            async def finished() -> dict[str, Any] | None:
                got = await api.get(f"/projects/{creds['project_id']}/commands/{issued['id']}")
                body: dict[str, Any] = got.json()
                return body if body["status"] == "succeeded" else None

            done = await wait_for(finished, within=30)
            assert done is not None
            assert done["error"] == "bad\ufffdbyte"
            assert done["result"] == {"k\ufffd": "v", "n": 2**70}
            assert done["acknowledged_at"] is not None
            assert ws.close_code is None  # still connected
    finally:
        await ws.close()
    row = _row(brain_server.admin_url, "SELECT state FROM agents WHERE id = %s", creds["agent_id"])
    assert row is not None
