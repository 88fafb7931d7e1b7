"""Agents through the API: the token is answered once and stored only as its HMAC."""

from __future__ import annotations

import psycopg
import pytest
from platformkit.tokens import parse_token
from z4j.api.agent_session import authenticate
from z4j.brain import AGENT_TOKEN, Brain
from z4j_agent.protocol import FrameError, decode_secret

from .conftest import Seed


async def test_create_answers_token_secret_and_environment_once(
    seed: Seed, brain: Brain, z4j_database: str
) -> None:
    owner = await seed.user("own@example.com")
    project = await seed.project(owner)
    async with seed.signed_in("own@example.com") as http:
        made = await http.post(f"/api/v1/projects/{project}/agents", json={"name": "billing"})
        assert made.status_code == 201
        assert made.headers["cache-control"] == "no-store"
        body = made.json()
        listed = await http.get(f"/api/v1/projects/{project}/agents")
        one = await http.get(f"/api/v1/projects/{project}/agents/{body['agent']['id']}")
    token, secret = body["token"], body["hmac_secret"]
    parse_token(AGENT_TOKEN, token)
    assert decode_secret(secret) == brain.secrets.project_secret(project)
    assert body["brain_url"] == "http://testserver"
    assert body["env_lines"] == [
        "Z4J_BRAIN_URL=http://testserver",
        f"Z4J_TOKEN={token}",
        f"Z4J_HMAC_SECRET={secret}",
        f"Z4J_PROJECT_ID={project}",
    ]
    assert body["install_snippet"] == "from z4j_agent.celery import install\ninstall(app)"
    assert body["agent"]["state"] == "unknown"
    # Never again: neither the list nor the single read carries the token.
    assert token not in listed.text
    assert token not in one.text
    assert [a["name"] for a in listed.json()] == ["billing"]
    with psycopg.connect(z4j_database) as conn:
        stored = conn.execute("SELECT token_hash FROM agents").fetchone()
        dump = str(conn.execute("SELECT * FROM agents").fetchall())
        audit = conn.execute(
            "SELECT details::text FROM audit_log WHERE action = 'agent.create'"
        ).fetchone()
    assert stored == (brain.token_hasher.hash(token),)
    assert token not in dump
    assert token[:20] not in str(audit)
    agent = await authenticate(brain, f"Bearer {token}")
    assert str(agent["id"]) == body["agent"]["id"]


async def test_names_are_unique_within_a_project(seed: Seed) -> None:
    owner = await seed.user("own@example.com")
    first, second = await seed.project(owner), await seed.project(owner)
    async with seed.signed_in("own@example.com") as http:
        assert (
            await http.post(f"/api/v1/projects/{first}/agents", json={"name": "w"})
        ).status_code == 201
        taken = await http.post(f"/api/v1/projects/{first}/agents", json={"name": "w"})
        assert taken.status_code == 409
        assert taken.json()["code"] == "agent.name_taken"
        elsewhere = await http.post(f"/api/v1/projects/{second}/agents", json={"name": "w"})
        assert elsewhere.status_code == 201
        blank = await http.post(f"/api/v1/projects/{first}/agents", json={"name": "  "})
        assert blank.status_code == 422


async def test_delete_revokes_the_token(seed: Seed, brain: Brain, z4j_database: str) -> None:
    owner = await seed.user("own@example.com")
    project = await seed.project(owner)
    created = await seed.agent(owner, project)
    [task] = seed.tasks(project, [{"agent_id": created.agent["id"]}])
    async with seed.signed_in("own@example.com") as http:
        url = f"/api/v1/projects/{project}/agents/{created.agent['id']}"
        assert (await http.delete(url)).status_code == 204
        gone = await http.delete(url)
        assert gone.status_code == 404
        assert gone.json()["code"] == "agent.not_found"
        detail = await http.get(f"/api/v1/projects/{project}/tasks/{task}")
    assert detail.json()["agent_id"] is None  # history stays, detached from the agent
    with pytest.raises(FrameError, match="unknown agent token"):
        await authenticate(brain, f"Bearer {created.token}")
