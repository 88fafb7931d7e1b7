"""The dashboard in a real browser against a real brain: sign in, the task list, a task's
detail, live updates pushed by an agent, and creating an agent. Screenshots land in tmp_path."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import websockets
from platformkit.testing.services import free_port
from z4j.actions import agents, users
from z4j.actions.context import Ctx, User
from z4j.brain import Brain
from z4j.ingest.fold import fold_batch
from z4j.settings import Settings
from z4j.startup import open_brain, prepare
from z4j.store import users as user_store
from z4j.store.ingest import write_folded
from z4j.testing import BrainProcess
from z4j_agent.protocol import FrameSigner, Session, decode_secret, format_ts, unsigned_frame

EMAIL, PASSWORD = "admin@example.com", "a long admin password"


def wire(kind: str, task: str, at: datetime, **data: Any) -> dict[str, Any]:
    return {
        "id": str(uuid.uuid4()),
        "engine": "celery",
        "kind": kind,
        "task_id": task,
        "occurred_at": format_ts(at),
        "data": data,
    }


def history(now: datetime) -> list[dict[str, Any]]:
    events = []
    for i in range(30):
        at = now - timedelta(minutes=40 - i)
        events += [
            wire(
                "task.sent",
                f"mail-{i}",
                at,
                task_name="shop.mail.send_receipt",
                queue="mail",
                args=[1000 + i],
                kwargs={"template": "receipt"},
            ),
            wire("task.started", f"mail-{i}", at + timedelta(seconds=1), worker="w1"),
            wire("task.succeeded", f"mail-{i}", at + timedelta(seconds=2), runtime_ms=850.0 + i),
        ]
    at = now - timedelta(minutes=3)
    events += [
        wire(
            "task.sent",
            "pay-1",
            at,
            task_name="shop.payments.charge",
            queue="payments",
            args=["order-77", 1999],
            kwargs={"currency": "EUR", "card_token": "tok_secret"},
        ),
        wire("task.started", "pay-1", at + timedelta(seconds=1), worker="celery@pay-1"),
        wire("task.retried", "pay-1", at + timedelta(seconds=2), retry_count=1),
        wire("task.started", "pay-1", at + timedelta(seconds=5), worker="celery@pay-1"),
        wire(
            "task.failed",
            "pay-1",
            at + timedelta(seconds=6),
            runtime_ms=412.0,
            exception={"type": "CardDeclined", "message": "insufficient funds"},
            traceback='Traceback (most recent call last):\n  File "shop/payments.py", line 42,'
            " in charge\n    gateway.charge(order, amount)\nCardDeclined: "
            "insufficient funds",
        ),
        wire(
            "task.sent",
            "report-1",
            now - timedelta(seconds=30),
            task_name="shop.reports.daily",
            queue="reports",
        ),
        wire("task.started", "report-1", now - timedelta(seconds=20), worker="celery@rep-1"),
    ]
    return events


async def seed_brain(server: BrainProcess) -> tuple[Brain, uuid.UUID, agents.CreatedAgent]:
    settings = Settings(
        database_url=server.admin_url,  # type: ignore[arg-type]
        config_dir=server.config_dir,
        public_url=server.url,
    )
    brain = await open_brain(await prepare(settings), max_size=2)
    assert await users.create_first_admin(brain, EMAIL, PASSWORD)
    async with brain.platform_tx() as conn:
        admin = await user_store.get_by_email(conn, EMAIL)
        cur = await conn.execute("SELECT id FROM projects WHERE name = 'default'")
        project = await cur.fetchone()
    assert admin is not None
    assert project is not None
    ctx = Ctx(brain, User.from_row(admin))
    created = await agents.create_agent(ctx, project["id"], "shop-workers", server.url)
    async with brain.project_tx(project["id"]) as conn:
        await write_folded(
            conn,
            project["id"],
            created.agent["id"],
            fold_batch(project["id"], history(datetime.now(UTC))),
        )
    return brain, project["id"], created


async def push_live_task(server: BrainProcess, created: agents.CreatedAgent) -> None:
    async with websockets.connect(
        f"ws://127.0.0.1:{server.port}/ws/agent",
        additional_headers={"Authorization": f"Bearer {created.token}"},
    ) as ws:
        await ws.send(
            json.dumps(
                unsigned_frame(
                    "hello",
                    {
                        "protocol_version": "2",
                        "agent_version": "0.1.0",
                        "framework": "celery",
                        "engines": ["celery"],
                        "worker_id": "celery@live-1",
                        "host": {"hostname": "live-1"},
                    },
                )
            )
        )
        ack = json.loads(await ws.recv())["payload"]
        signer = FrameSigner(
            Session(
                decode_secret(created.hmac_secret),
                ack["agent_id"],
                ack["project_id"],
                ack["session_id"],
            )
        )
        now = datetime.now(UTC)
        await ws.send(
            json.dumps(
                signer.sign(
                    "event_batch",
                    {
                        "events": [
                            wire(
                                "task.sent",
                                "live-1",
                                now,
                                task_name="shop.live.arrived",
                                queue="celery",
                            )
                        ]
                    },
                )
            )
        )
        await ws.recv()


@pytest.fixture
def brain_server(z4j_database: str, tmp_path: Path) -> Iterator[BrainProcess]:
    """``z4j serve`` in a subprocess on a free port, over this test's fresh database."""
    server = BrainProcess(z4j_database, tmp_path / "config", free_port(), tmp_path / "brain.log")
    server.start()
    yield server
    server.stop()


async def test_sign_in_browse_and_watch_live(
    brain_server: BrainProcess, page: Any, tmp_path: Path
) -> None:
    brain, project, created = await seed_brain(brain_server)
    try:
        page.set_default_timeout(15_000)
        await page.set_viewport_size({"width": 1280, "height": 860})
        await page.goto(f"{brain_server.url}/projects/{project}/tasks")
        assert "/login?next=" in page.url
        await page.fill("input[name=email]", EMAIL)
        await page.fill("input[name=password]", PASSWORD)
        await page.click("button[type=submit]")
        await page.wait_for_url(f"**/projects/{project}/tasks")
        table = page.locator("table.tasks")
        await table.get_by_text("shop.payments.charge").wait_for()
        assert await table.locator("tbody tr").count() == 32
        assert await page.locator(".badge.state-failed").first.inner_text() == "failed"
        await page.screenshot(path=str(tmp_path / "tasks.png"), full_page=True)

        # Live: an agent reports a new task; the table refreshes without a reload.
        await page.locator("#live.on").wait_for()
        await push_live_task(brain_server, created)
        await table.get_by_text("shop.live.arrived").wait_for()

        # Filters without script semantics: the form is a plain GET.
        await page.locator("label.chip.chip-failed").click()
        await page.click("form.filters button[type=submit]")
        await page.wait_for_url("**state=failed**")
        assert await table.locator("tbody tr").count() == 1
        await page.screenshot(path=str(tmp_path / "tasks-failed.png"))

        await table.get_by_text("shop.payments.charge").click()
        await page.get_by_text("CardDeclined").first.wait_for()
        body = await page.locator("main").inner_text()
        assert "insufficient funds" in body
        assert "order-77" in body
        assert "tok_secret" not in body  # redacted by ingest before it was stored
        steps = await page.locator("ol.timeline .ev-type").all_inner_texts()
        assert steps == ["task_sent", "started", "retry", "started", "failed"]
        assert "gateway.charge(order, amount)" in await page.locator("pre.traceback").inner_text()
        await page.screenshot(path=str(tmp_path / "task.png"), full_page=True)

        await page.click("nav.tabs >> text=Agents")
        await page.get_by_text("shop-workers").wait_for()
        await page.fill("input[name=name]", "reporting")
        await page.click("text=Create agent")
        token = await page.locator("#agent-token").inner_text()
        assert token.startswith("z4ja_")
        assert "Z4J_HMAC_SECRET=" in await page.locator("#agent-env").inner_text()
        await page.screenshot(path=str(tmp_path / "agent-created.png"), full_page=True)
        await page.goto(f"{brain_server.url}/projects/{project}/agents")
        assert token not in await page.content()

        await page.goto(f"{brain_server.url}/projects/{project}")
        await page.screenshot(path=str(tmp_path / "overview.png"), full_page=True)
        print(f"screenshots in {tmp_path}")
    finally:
        await brain.pool.close()
