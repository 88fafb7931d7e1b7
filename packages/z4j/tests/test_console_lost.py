"""The dashboard on lost tasks and on tasks whose state cannot be known: the lost transition in
the timeline with its reason, lost counted and filterable, and a notice (on the task and on the
agent) for received tasks that never start because the worker sends no task events."""

from __future__ import annotations

import re
import uuid
from datetime import UTC, datetime, timedelta

import psycopg
from psycopg.types.json import Jsonb

from .conftest import Seed

REASON = "its worker has been silent for 300 s (grace period 120 s)"


async def test_lost_and_unstarted_tasks_on_the_dashboard(seed: Seed, z4j_database: str) -> None:
    owner = await seed.user("lost@example.com")
    project = await seed.project(owner, "lost-shop")
    agent = (await seed.agent(owner, project, "prefork-workers")).agent["id"]
    now = datetime.now(UTC)
    lost, waiting, fresh = seed.tasks(
        project,
        [
            {
                "name": "shop.long",
                "state": "lost",
                "agent_id": agent,
                "worker": "celery@w1",
                "created_at": now - timedelta(minutes=20),
            },
            {
                "name": "shop.waiting",
                "state": "pending",
                "agent_id": agent,
                "worker": "celery@w1",
                "created_at": now - timedelta(minutes=5),
            },
            {
                "name": "shop.fresh",
                "state": "pending",
                "agent_id": agent,
                "worker": "celery@w1",
                "created_at": now - timedelta(seconds=5),
            },
        ],
    )
    with psycopg.connect(z4j_database) as conn:
        conn.execute(
            "UPDATE agents SET state = 'online', last_connect_at = now() - interval '10 minutes' "
            "WHERE id = %s",
            (agent,),
        )
        conn.execute(
            "INSERT INTO agent_workers (agent_id, worker_id, project_id, connected, last_seen_at, "
            "active_task_ids, active_reported_at) VALUES "
            "(%s, 'celery@ours', %s, true, now(), ARRAY['a', 'b'], now()), "
            "(%s, 'celery-4242-1700000000000', %s, false, now(), NULL, NULL)",
            (agent, project, agent, project),
        )
        conn.execute(
            "INSERT INTO events (id, task_id, agent_id, project_id, event_type, ts, payload) "
            "VALUES (%s, %s, %s, %s, 'lost', now(), %s)",
            (uuid.uuid4(), lost, agent, project, Jsonb({"reason": REASON, "source": "brain"})),
        )
    async with seed.signed_in("lost@example.com") as http:
        overview = await http.get(f"/projects/{project}")
        assert re.search(r'stat-n">1<.*?lost', overview.text, re.S)

        only_lost = await http.get(f"/projects/{project}/tasks", params={"state": "lost"})
        assert "shop.long" in only_lost.text
        assert "shop.waiting" not in only_lost.text

        detail = await http.get(f"/projects/{project}/tasks/{lost}")
        assert 'class="ev ev-lost"' in detail.text
        assert REASON in detail.text
        assert "no start has been reported" not in detail.text

        unstarted = await http.get(f"/projects/{project}/tasks/{waiting}")
        assert "no start has been reported" in unstarted.text
        assert "worker_send_task_events = True" in unstarted.text
        assert "celery@w1" in unstarted.text

        young = await http.get(f"/projects/{project}/tasks/{fresh}")
        assert "no start has been reported" not in young.text

        agents_page = await http.get(f"/projects/{project}/agents")
        assert "no start reported" in agents_page.text
        assert "2 connections" in agents_page.text
        assert re.search(r"celery@ours</span> · connected .*? · 2 running", agents_page.text)
        assert re.search(
            r"celery-4242-1700000000000</span> · closed .*?running tasks not reported",
            agents_page.text,
        )

        # Once a task of the agent starts, its workers evidently send what is needed.
        with psycopg.connect(z4j_database) as conn:
            conn.execute("UPDATE tasks SET state = 'started' WHERE id = %s", (fresh,))
        agents_page = await http.get(f"/projects/{project}/agents")
        assert "no start reported" not in agents_page.text
