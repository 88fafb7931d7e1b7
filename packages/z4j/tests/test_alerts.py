"""Alert rules through the API, and the evaluation loop of a running brain against a real
webhook receiver and a real SMTP server on loopback: a firing is announced once to each
channel, a refused address is retried and its error kept, and the end is announced once."""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from email import message_from_bytes
from email import policy as email_policy
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import psycopg
import pytest
from platformkit.mail import SmtpSecurity
from platformkit.testing.smtp import SmtpInbox, smtp_server
from z4j.controllers.alerts import DeliveryFailed, post_webhook
from z4j.domain.alerts import Kind, Notice, Phase, RuleSpec
from z4j.settings import Settings
from z4j.store import alerts as store
from z4j.testing import wait_for

from .conftest import BASE_URL, Seed


class Hook:
    def __init__(self) -> None:
        self.received: list[tuple[dict[str, str], dict[str, Any]]] = []
        self.url = ""

    def of(self, status: str) -> list[dict[str, Any]]:
        return [body for _h, body in self.received if body["status"] == status]


@pytest.fixture
def hook() -> Iterator[Hook]:
    found = Hook()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"]))
            found.received.append((dict(self.headers), json.loads(body)))
            self.send_response(204)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    found.url = f"http://127.0.0.1:{server.server_address[1]}/hooks/z4j"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield found
    server.shutdown()
    server.server_close()


@pytest.fixture
def inbox() -> Iterator[SmtpInbox]:
    with smtp_server() as server:
        yield server


@pytest.fixture
def z4j_settings(z4j_database: str, tmp_path: Path, inbox: SmtpInbox) -> Settings:
    return Settings(
        database_url=z4j_database,  # type: ignore[arg-type]
        config_dir=tmp_path / "config",
        public_url=BASE_URL,
        smtp_host="127.0.0.1",
        smtp_port=inbox.port,
        smtp_security=SmtpSecurity.NONE,
        alert_interval_seconds=1,
        alert_webhooks_private=True,
    )


def finish(url: str, project: uuid.UUID, state: str, n: int, runtime_ms: float = 5.0) -> None:
    now = datetime.now(UTC)
    with psycopg.connect(url) as conn:
        for _ in range(n):
            conn.execute(
                "INSERT INTO tasks (id, project_id, engine, name, queue, state, enqueued_at,"
                " finished_at, runtime_ms) VALUES (%s, %s, 'celery', 'app.pay', 'billing', %s,"
                " %s, %s, %s)",
                (uuid.uuid4(), project, state, now, now, runtime_ms),
            )


def subjects(inbox: SmtpInbox) -> list[tuple[list[str], str]]:
    out = []
    for envelope in inbox.received:
        message = message_from_bytes(envelope.content, policy=email_policy.default)
        out.append((list(envelope.rcpt_tos), str(message["Subject"])))
    return out


async def test_rules_through_the_api(seed: Seed, z4j_database: str) -> None:
    owner = await seed.user("own@example.com")
    project = await seed.project(owner)
    viewer = await seed.user("view@example.com")
    await seed.member(project, viewer, "viewer")
    rules = f"/api/v1/projects/{project}/alert-rules"
    body = {"name": "payments failing", "kind": "failure_rate", "threshold": 20,
            "window_seconds": 600, "task_name": "app.pay",
            "webhook_url": "https://hooks.example.com/services/T0/SECRET",
            "emails": ["Ops@Example.com"]}  # fmt: skip
    async with seed.signed_in("own@example.com") as http:
        created = await http.post(rules, json=body)
        assert created.status_code == 201, created.text
        rule = created.json()
        assert rule["emails"] == ["ops@example.com"]
        assert rule["webhook_url"].endswith("/SECRET")
        assert (await http.post(rules, json=body)).status_code == 409
        for bad, field in (
            ({**body, "name": "x", "threshold": 101}, "threshold"),
            ({**body, "name": "x", "agent_name": "a1"}, "agent_name"),
            ({**body, "name": "x", "webhook_url": "ftp://h/x"}, "webhook_url"),
            ({**body, "name": "x", "webhook_url": "https://u:p@h/x"}, "webhook_url"),
            ({**body, "name": "x", "emails": ["not an address"]}, "emails"),
            ({**body, "name": "x", "window_seconds": 5}, "window_seconds"),
        ):
            answer = await http.post(rules, json=bad)
            assert answer.status_code == 422, (bad, answer.text)
            assert answer.json().get("field") == field or field in answer.text
        changed = await http.patch(f"{rules}/{rule['id']}", json={"enabled": False})
        assert changed.status_code == 200
        assert changed.json()["enabled"] is False
        assert changed.json()["threshold"] == 20
    async with seed.signed_in("view@example.com") as http:
        seen = (await http.get(f"/api/v1/projects/{project}/alerts")).json()
        assert seen["rules"][0]["webhook_url"] == "https://hooks.example.com/…"
        assert (await http.post(rules, json={**body, "name": "v"})).status_code == 403
        assert (await http.delete(f"{rules}/{rule['id']}")).status_code == 403
        page = await http.get(f"/projects/{project}/alerts")
        assert "SECRET" not in page.text
        assert "Create rule" not in page.text
    stranger = await seed.user("else@example.com")
    await seed.project(stranger)
    async with seed.signed_in("else@example.com") as http:
        assert (await http.get(f"/api/v1/projects/{project}/alerts")).status_code == 404
        assert (await http.delete(f"{rules}/{rule['id']}")).status_code == 404
    async with seed.signed_in("own@example.com") as http:
        assert (await http.delete(f"{rules}/{rule['id']}")).status_code == 204
        assert (await http.delete(f"{rules}/{rule['id']}")).status_code == 404
    with psycopg.connect(z4j_database) as conn:
        rows = conn.execute(
            "SELECT action, details FROM audit_log WHERE action LIKE 'alert_rule.%%' ORDER BY id"
        ).fetchall()
    assert [r[0] for r in rows] == ["alert_rule.create", "alert_rule.update", "alert_rule.delete"]
    assert "SECRET" not in json.dumps([r[1] for r in rows])


async def test_a_firing_is_announced_once_and_its_end_once(
    seed: Seed, z4j_database: str, hook: Hook, inbox: SmtpInbox
) -> None:
    owner = await seed.user("own@example.com")
    project = await seed.project(owner)
    async with seed.signed_in("own@example.com") as http:
        created = await http.post(
            f"/api/v1/projects/{project}/alert-rules",
            json={"name": "payments failing", "kind": "failure_rate", "threshold": 50,
                  "min_tasks": 3, "queue": "billing", "webhook_url": hook.url,
                  "emails": ["ops@example.com", "nobody@example.com"]},
        )  # fmt: skip
        assert created.status_code == 201, created.text
        finish(z4j_database, project, "failed", 2)

        async def fired() -> bool:
            return bool(hook.of("firing"))

        assert not await wait_for(fired, within=3)  # 2 tasks: below min_tasks
        finish(z4j_database, project, "failed", 2)
        assert await wait_for(fired, within=60)
        headers, firing = hook.received[0]
        assert firing["rule"]["name"] == "payments failing"
        assert firing["value"] == 100.0
        assert headers["X-Z4J-Event"] == "alert.firing"
        assert headers["Idempotency-Key"] == f"{firing['firing_id']}:firing"

        async def mailed() -> bool:
            return any("FIRING" in s for _to, s in subjects(inbox))

        assert await wait_for(mailed, within=60)

        async def error_kept() -> Any:
            got = (await http.get(f"/api/v1/projects/{project}/alerts")).json()
            return got["firings"] and got["firings"][0]["last_error"]

        error = await wait_for(error_kept, within=60)
        assert error is not None
        assert error.startswith("email:nobody@example.com")

        async def rounds() -> bool:
            got = (await http.get(f"/api/v1/projects/{project}/alerts")).json()
            return got["firings"][0]["attempts"] >= 3

        assert await wait_for(rounds, within=60)  # several rounds ran meanwhile
        assert len(hook.of("firing")) == 1
        assert [to for to, s in subjects(inbox) if "FIRING" in s] == [["ops@example.com"]]

        finish(z4j_database, project, "succeeded", 12)

        async def resolved() -> bool:
            return bool(hook.of("resolved"))

        assert await wait_for(resolved, within=60)
        end = hook.of("resolved")[0]
        assert end["firing_id"] == firing["firing_id"]
        assert end["resolved_at"] is not None
        assert end["value"] == pytest.approx(100 * 4 / 16)

        async def resolved_mail() -> bool:
            return any("RESOLVED" in s for _to, s in subjects(inbox))

        assert await wait_for(resolved_mail, within=60)
        got = (await http.get(f"/api/v1/projects/{project}/alerts")).json()
        assert got["rules"][0]["firing_since"] is None
        assert got["firings"][0]["resolved_at"] is not None
        assert len(hook.of("firing")) == 1
        assert len(hook.of("resolved")) == 1
        page = await http.get(f"/projects/{project}/alerts")
        assert "payments failing" in page.text


async def test_each_kind_measures_its_value(seed: Seed, z4j_database: str) -> None:
    owner = await seed.user("own@example.com")
    project = await seed.project(owner)
    agent = await seed.agent(owner, project, "edge")
    now = datetime.now(UTC)
    finish(z4j_database, project, "succeeded", 19, runtime_ms=100.0)
    finish(z4j_database, project, "succeeded", 1, runtime_ms=9000.0)
    with psycopg.connect(z4j_database) as conn:
        for age in (30, 90):
            conn.execute(
                "INSERT INTO tasks (id, project_id, engine, queue, state, enqueued_at)"
                " VALUES (%s, %s, 'celery', 'billing', 'pending', %s)",
                (uuid.uuid4(), project, now - timedelta(seconds=age)),
            )
        conn.execute(
            "UPDATE agents SET state = 'offline', last_seen_at = %s WHERE id = %s",
            (now - timedelta(minutes=10), agent.agent["id"]),
        )
        for worker, silent in (("w-quiet", timedelta(minutes=10)), ("w-live", timedelta(0)),
                               ("w-gone", timedelta(days=2))):  # fmt: skip
            conn.execute(
                "INSERT INTO agent_workers (agent_id, worker_id, project_id, last_seen_at)"
                " VALUES (%s, %s, %s, %s)",
                (agent.agent["id"], worker, project, now - silent),
            )

    async def value(kind: Kind, **extra: Any) -> float | None:
        spec = RuleSpec("r", kind, 0, **extra)
        async with seed.brain.project_tx(project) as conn:
            return await store.measure(conn, project, spec, now + timedelta(seconds=1))

    assert await value(Kind.FAILURE_RATE) == 0.0
    assert await value(Kind.FAILURE_RATE, min_tasks=21) is None
    p95 = await value(Kind.RUNTIME_P95)
    assert p95 is not None
    assert 0.1 < p95 < 9.0
    assert await value(Kind.QUEUE_DEPTH, queue="billing") == 2.0
    assert await value(Kind.QUEUE_DEPTH, queue="other") == 0.0
    age = await value(Kind.BACKLOG_AGE)
    assert age is not None
    assert 90 <= age < 120
    assert await value(Kind.AGENT_OFFLINE, window_seconds=300) == 1.0
    assert await value(Kind.AGENT_OFFLINE, window_seconds=900) == 0.0
    assert await value(Kind.AGENT_OFFLINE, window_seconds=300, agent_name="other") == 0.0
    # silent past the window, and heard from in the last day
    assert await value(Kind.WORKER_OFFLINE, window_seconds=300) == 1.0
    assert await value(Kind.WORKER_OFFLINE, window_seconds=300, agent_name="edge") == 1.0
    assert await value(Kind.WORKER_OFFLINE, window_seconds=300, agent_name="other") == 0.0
    assert await value(Kind.WORKER_OFFLINE, window_seconds=900) == 0.0


async def test_a_webhook_to_a_private_address_is_refused_by_default(seed: Seed) -> None:
    assert Settings.model_fields["alert_webhooks_private"].default is False
    brain = replace(seed.brain, settings=seed.brain.settings.model_copy(
        update={"alert_webhooks_private": False}))  # fmt: skip
    notice = Notice(Phase.FIRING, "r", "f", "p", "proj", RuleSpec("r", Kind.QUEUE_DEPTH, 1),
                    2.0, datetime.now(UTC), None, BASE_URL)  # fmt: skip
    with pytest.raises(DeliveryFailed, match="not a public address"):
        await post_webhook(brain, "http://127.0.0.1:9/hook", notice)
