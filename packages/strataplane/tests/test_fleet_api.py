"""The fleet's management API and agent endpoints in process: enrollment tokens and the
exchange, approval, hosts and labels by source, zones through a trusted proxy, forgetting,
explain, heartbeats (logs capped, transitions only), tenant isolation, and the change-set
hooks (impact rows, release pointer)."""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import AsyncIterator
from datetime import datetime
from typing import Any
from uuid import UUID

import httpx
import psycopg
import pytest
from asgi_lifespan import LifespanManager
from fastapi import FastAPI
from platformkit.db.scope import tenant_transaction
from platformkit.passwords import FAST_TEST_POLICY
from pydantic import SecretStr
from strataplane.actions import fleet_hooks, tokens
from strataplane.actions.context import Services
from strataplane.agents.telegraf import MAX_HEARTBEAT
from strataplane.app import create_app
from strataplane.db import SCOPE
from strataplane.domain.fleet_status import http_date
from strataplane.domain.spec.canonical import canonicalize
from strataplane.settings import Settings
from strataplane.simulate.seed import publish
from strataplane.store import fleet_agents, fleet_serving
from strataplane.testing import Seed, client_for

UA = {"User-Agent": "Telegraf/1.39.1 Go/1.24.4"}
FILES = {
    "layers/base.toml": 'agentKind = "telegraf"\nowner = "p"\nroutes = ["out"]\n\n'
    "[config.inputs.cpu.default]\npercpu = false\n",
    "routes/out.toml": 'agentKind = "telegraf"\nowner = "p"\n\n'
    '[config.outputs.file.main]\nfiles = ["stdout"]\n',
    "layers/prod.toml": 'agentKind = "telegraf"\nowner = "p"\nprecedence = 5\n\n'
    '[config.global_tags]\nenv = "prod"\n\n[selector.matchLabels]\nzone = "b"\n',
}


@pytest.fixture
async def app(strataplane_database: str, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[FastAPI]:
    monkeypatch.setenv("STRATAPLANE_FLEET_PROXY_FROM", '["127.0.0.0/8"]')
    settings = Settings(database_url=SecretStr(strataplane_database), pool_size=8, shards=2)
    created = create_app(settings, password_policy=FAST_TEST_POLICY)
    async with LifespanManager(created):
        yield created


class Tenant:
    def __init__(self, app: FastAPI, seed: Seed, tenant_id: UUID, token: str) -> None:
        self.app, self.seed, self.id, self.token = app, seed, tenant_id, token

    def http(self, token: str | None = None) -> httpx.AsyncClient:
        return client_for(self.app, token or self.token)

    async def enrollment_token(self, **body: Any) -> str:
        async with self.http() as http:
            r = await http.post("/api/v1/enrollment-tokens", json={"name": "t", **body})
            assert r.status_code == 201, r.text
            token: str = r.json()["token"]
            return token

    async def enroll(self, token: str, name: str, ip: str = "10.9.9.9") -> httpx.Response:
        async with client_for(self.app, token) as http:
            return await http.post(
                "/api/v1/enroll/telegraf",
                json={"instance_id": name, "hostname": name},
                headers={"X-Forwarded-For": ip},
            )


async def make_tenant(app: FastAPI, seed: Seed) -> Tenant:
    tenant, admin = await seed.tenant()
    created = await tokens.create_token(seed.ctx(admin, tenant.id), "ops")
    return Tenant(app, seed, tenant.id, created.plaintext)


@pytest.fixture
async def tenants(app: FastAPI) -> tuple[Tenant, Tenant]:
    seed = Seed(app.state.services)
    return await make_tenant(app, seed), await make_tenant(app, seed)


async def test_enrollment_tokens_exchange_and_rejections(tenants: tuple[Tenant, Tenant]) -> None:
    a, _b = tenants
    token = await a.enrollment_token(labels={"env": "prod"}, max_uses=2)
    assert token.startswith("spn_")
    ok = await a.enroll(token, "web-1")
    assert ok.status_code == 201, ok.text
    body = ok.json()
    assert body["credential"].startswith("spt_")
    assert body["config_url"].endswith("/config")
    assert body["environment"]["STRATAPLANE_INSTANCE_ID"] == "web-1"
    assert "--config-url-watch-interval" in body["command"]
    assert (await a.enroll(token, "web-2")).status_code == 201
    assert (await a.enroll(token, "web-3")).json()["code"] == "enrollment.rejected"  # used up
    assert (await a.enroll("spn_" + "a" * 52, "x")).status_code == 401
    other = await a.enrollment_token()
    async with a.http() as http:
        listed = (await http.get("/api/v1/enrollment-tokens")).json()
        assert {t["uses"] for t in listed} == {2, 0}
        revoke = await http.delete(f"/api/v1/enrollment-tokens/{listed[1]['id']}")
        assert revoke.status_code == 200
        mode = await http.post("/api/v1/enrollment-tokens", json={"name": "c", "mode": "pair"})
        assert mode.status_code == 422
        body = {"name": "c", "mode": "class", "agent_kind": "vector"}
        assert (await http.post("/api/v1/enrollment-tokens", json=body)).status_code == 422
        body = {"name": "c", "mode": "class"}
        assert (await http.post("/api/v1/enrollment-tokens", json=body)).status_code == 201
    assert (await a.enroll(other, "web-4")).status_code == 401


async def test_approval_labels_zones_and_render(tenants: tuple[Tenant, Tenant]) -> None:
    a, _b = tenants
    await publish(a.app.state.services.pool, a.id, FILES)
    async with a.http() as http:
        for cidr, zone in (("10.0.0.0/8", "a"), ("10.1.0.0/16", "b")):
            r = await http.post(
                "/api/v1/network-zones", json={"cidr": cidr, "labels": {"zone": zone}}
            )
            assert r.status_code == 201, r.text
    token = await a.enrollment_token(
        labels={"env": "prod", "zone": "office"}, requires_approval=True
    )
    enrolled = (await a.enroll(token, "db-1", ip="10.1.2.3")).json()
    # the agent's requests come through the same proxy
    cred = {"Authorization": f"Bearer {enrolled['credential']}", "X-Forwarded-For": "10.1.2.3"}
    cred |= UA
    async with client_for(a.app) as agent:
        refused = await agent.get("/agents/telegraf/config", headers=cred)
        assert refused.status_code == 403
        assert refused.json()["code"] == "agent.not_approved"
    async with a.http() as http:
        assert (
            await http.post(f"/api/v1/agents/{enrolled['agent_id']}/approve")
        ).status_code == 200
        host = (await http.get(f"/api/v1/hosts/{enrolled['host_id']}")).json()
        assert host["labels"]["zone"] == "office"  # enrollment outranks zone
        by_source = {(r["source"], r["key"]): r["value"] for r in host["labels_by_source"]}
        assert by_source[("zone", "zone")] == "b"  # the longest prefix, via the trusted proxy
        r = await http.put(
            f"/api/v1/hosts/{enrolled['host_id']}/labels", json={"labels": {"zone": "b"}}
        )
        assert r.json()["labels"]["zone"] == "b"  # manual outranks everything
        bad = await http.put(
            f"/api/v1/hosts/{enrolled['host_id']}/labels", json={"labels": {"host.name": "x"}}
        )
        assert bad.status_code == 422
    async with client_for(a.app) as agent:
        got = await agent.get("/agents/telegraf/config", headers=cred)
        assert got.status_code == 200, got.text
        assert got.headers["content-type"].startswith("application/toml")
        assert 'env = "prod"' in got.text  # the zone=b Layer applies after the manual label
        head = await agent.head("/agents/telegraf/config", headers=cred)
        assert head.headers["last-modified"] == got.headers["last-modified"]
    async with a.http() as http:
        explained = (await http.get(f"/api/v1/agents/{enrolled['agent_id']}/explain")).json()
        assert explained["render"]["layers"] == ["layers/base.toml", "layers/prod.toml"]
        assert explained["render"]["values"]["global_tags.env"]["layer"] == "layers/prod.toml"
        assert explained["render"]["artifact"] == explained["desired"]["artifact"]


async def test_heartbeats_logs_capped_and_transitions_only(tenants: tuple[Tenant, Tenant]) -> None:
    a, _b = tenants
    await publish(a.app.state.services.pool, a.id, FILES)
    enrolled = (await a.enroll(await a.enrollment_token(), "app-1")).json()
    cred = {"Authorization": f"Bearer {enrolled['credential']}", **UA}
    async with client_for(a.app) as agent:
        config = await agent.get("/agents/telegraf/config", headers=cred)
        digest = config.text.split('X-Strataplane-Config-Hash = "')[1][:64]
        for i in range(3):
            logs = [
                {
                    "time": f"2026-01-01T00:{i:02d}:{j % 60:02d}Z",
                    "level": "WARN",
                    "source": "inputs.cpu::default",
                    "message": f"m{i}-{j}",
                }
                for j in range(100)
            ]
            body = {
                "id": "app-1",
                "version": "Telegraf 1.39.1",
                "schema": 1,
                "status": "OK",
                "statistics": {"errors": 0, "warnings": 1, "metrics": 10},
                "logs": logs,
            }
            r = await agent.post(
                "/agents/telegraf/heartbeat",
                content=json.dumps(body),
                headers={**cred, "X-Strataplane-Config-Hash": digest},
            )
            assert r.status_code == 200, r.text
            await a.app.state.fleet.batcher.flush()
        bad = await agent.post("/agents/telegraf/heartbeat", content=b"{}", headers=cred)
        assert bad.status_code == 422
    services: Services = a.app.state.services
    async with tenant_transaction(services.pool, SCOPE, a.id) as conn:
        n = await (await conn.execute("SELECT count(*) AS n FROM agent_log_entry")).fetchone()
        events = await (
            await conn.execute("SELECT field, to_value FROM agent_status_event ORDER BY id")
        ).fetchall()
    assert n is not None
    assert n["n"] == 200
    assert [(e["field"], e["to_value"]) for e in events] == [
        ("version", "1.39.1"),
        ("health", "healthy"),
        ("sync", "in_sync"),
        ("applied", digest),
    ]
    async with a.http() as http:
        agent_out = (await http.get(f"/api/v1/agents/{enrolled['agent_id']}")).json()
        assert agent_out["sync"] == "in_sync"
        assert agent_out["applied_artifact"] == digest


async def test_tenants_see_nothing_of_each_other(tenants: tuple[Tenant, Tenant]) -> None:
    a, b = tenants
    await publish(a.app.state.services.pool, a.id, FILES)
    enrolled = (await a.enroll(await a.enrollment_token(), "shared-name")).json()
    mine = (await b.enroll(await b.enrollment_token(), "shared-name")).json()
    assert mine["host_id"] != enrolled["host_id"]
    async with b.http() as http:
        assert (await http.get(f"/api/v1/hosts/{enrolled['host_id']}")).status_code == 404
        assert (await http.get(f"/api/v1/agents/{enrolled['agent_id']}")).status_code == 404
        assert (await http.delete(f"/api/v1/agents/{enrolled['agent_id']}")).status_code == 404
        names = [h["id"] for h in (await http.get("/api/v1/hosts")).json()["items"]]
        assert names == [mine["host_id"]]
    async with client_for(a.app) as agent:  # b's agent has no config in b (empty spec)
        r = await agent.get(
            "/agents/telegraf/config",
            headers={"Authorization": f"Bearer {mine['credential']}", **UA},
        )
        assert r.status_code == 503
    async with a.http() as http:
        assert (await http.delete(f"/api/v1/agents/{enrolled['agent_id']}")).status_code == 204
        assert (await http.get(f"/api/v1/hosts/{enrolled['host_id']}")).status_code == 404
    async with client_for(a.app) as agent:
        r = await agent.head(
            "/agents/telegraf/config", headers={"Authorization": f"Bearer {enrolled['credential']}"}
        )
        assert r.status_code == 401


async def test_impact_and_merge_hooks(tenants: tuple[Tenant, Tenant]) -> None:
    a, _b = tenants
    services: Services = a.app.state.services
    first = await publish(services.pool, a.id, FILES)
    for i in range(3):
        await a.enroll(await a.enrollment_token(labels={"zone": "b" if i else "a"}), f"n-{i}")
    async with tenant_transaction(services.pool, SCOPE, a.id) as conn:
        cur = await conn.execute(
            "INSERT INTO change_set (id, tenant_id, number, title, author_id, base_revision_id, "
            "digest) SELECT gen_random_uuid(), %s, 99, 't', user_id, %s, '\\x00' FROM "
            "tenant_member WHERE tenant_id = %s LIMIT 1 RETURNING id",
            (a.id, first, a.id),
        )
        row = await cur.fetchone()
        assert row is not None
        changed = {**FILES, "layers/prod.toml": FILES["layers/prod.toml"].replace('prod"', 'live"')}
        result = {p: canonicalize(c.encode(), p).content for p, c in changed.items()}
        impact = await fleet_hooks.change_set_impact(
            conn, a.id, row["id"], first, result, agent_url="http://sp"
        )
        assert impact.summary["agents"] == 2
        assert impact.summary["byKind"] == {"telegraf": 2}
        count = await (await conn.execute("SELECT count(*) AS n FROM change_set_impact")).fetchone()
        assert count is not None
        assert count["n"] == 2
        await fleet_hooks.change_set_merged(conn, a.id, row["id"], first, None)
        count = await (await conn.execute("SELECT count(*) AS n FROM change_set_impact")).fetchone()
        assert count is not None
        assert count["n"] == 0


async def test_explain_command(strataplane_database: str, sp_seed: Seed) -> None:
    from strataplane.actions import fleet_enrollment
    from strataplane.cli import app as cli
    from typer.testing import CliRunner

    tenant, admin = await sp_seed.tenant("explained")
    await publish(sp_seed.services.pool, tenant.id, FILES)
    created = await fleet_enrollment.create_enrollment_token(sp_seed.ctx(admin, tenant.id), "t")
    await fleet_enrollment.enroll_agent(
        sp_seed.services,
        created.plaintext,
        instance_id="cli-1",
        hostname="cli-1",
        agent_url="http://sp",
    )
    args = ["explain", "cli-1", "--tenant", "explained", "--database-url", strataplane_database]
    result = await asyncio.to_thread(CliRunner().invoke, cli, args)  # it runs its own loop
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert out["render"]["layers"] == ["layers/base.toml"]
    assert out["render"]["values"]["inputs.cpu.default.percpu"]["layer"] == "layers/base.toml"


CONFIG = "/agents/telegraf/config"
HEARTBEAT = "/agents/telegraf/heartbeat"


async def test_agent_endpoints_are_served_ahead_of_the_api(tenants: tuple[Tenant, Tenant]) -> None:
    """The agents' paths skip the API's middleware but keep its problem+json errors."""
    a, _b = tenants
    await publish(a.app.state.services.pool, a.id, FILES)
    enrolled = (await a.enroll(await a.enrollment_token(), "front-1")).json()
    cred = {"Authorization": f"Bearer {enrolled['credential']}", **UA}
    async with client_for(a.app) as agent:
        wrong = await agent.put(CONFIG, headers=cred)
        assert wrong.status_code == 405
        assert wrong.headers["allow"] == "GET, HEAD"
        assert wrong.headers["content-type"] == "application/problem+json"
        assert wrong.json()["code"] == "method_not_allowed"
        anonymous = await agent.get(CONFIG, headers=UA)
        assert anonymous.status_code == 401
        assert anonymous.headers["www-authenticate"].startswith("Bearer")
        assert anonymous.json()["code"] == "auth.required"
        large = await agent.post(HEARTBEAT, content=b" " * (MAX_HEARTBEAT + 1), headers=cred)
        assert large.status_code == 413
        assert large.json()["code"] == "content_too_large"
        got = await agent.get(CONFIG, headers=cred)
        assert got.status_code == 200
        assert got.headers["content-type"] == "application/toml"
        assert got.headers["cache-control"] == "no-store"
        assert int(got.headers["content-length"]) == len(got.content)
        assert "x-request-id" not in got.headers  # the kernel middleware was not involved
        head = await agent.head(CONFIG, headers=cred)
        assert head.status_code == 200
        assert head.content == b""
    async with a.http() as http:  # the API itself still goes through it
        assert "x-request-id" in (await http.get("/api/v1/hosts")).headers


async def test_merge_changes_last_modified_on_the_next_head(tenants: tuple[Tenant, Tenant]) -> None:
    a, _b = tenants
    services: Services = a.app.state.services
    await publish(services.pool, a.id, FILES)
    enrolled = (await a.enroll(await a.enrollment_token(), "merge-1")).json()
    cred = {"Authorization": f"Bearer {enrolled['credential']}", **UA}
    async with client_for(a.app) as agent:
        before = (await agent.get(CONFIG, headers=cred)).headers["last-modified"]
        assert (await agent.head(CONFIG, headers=cred)).headers["last-modified"] == before
        await asyncio.sleep(1.1)  # Last-Modified has whole seconds
        changed = {**FILES, "layers/base.toml": FILES["layers/base.toml"].replace("false", "true")}
        second = await publish(services.pool, a.id, changed)
        for _ in range(300):  # the reconciler renders the agent and commits
            if (await desired(services, a.id, enrolled["agent_id"]))[0] == second:
                break
            await asyncio.sleep(0.05)
        else:
            pytest.fail("the merge was not rendered")
        # the agent still runs the old artifact: the next HEAD shows another date
        assert (await agent.head(CONFIG, headers=cred)).headers["last-modified"] != before
        got = await agent.get(CONFIG, headers=cred)
        assert "percpu = true" in got.text
        since = (await desired(services, a.id, enrolled["agent_id"]))[1]
        assert got.headers["last-modified"] == http_date(since)
        assert (await agent.head(CONFIG, headers=cred)).headers["last-modified"] == http_date(since)


async def desired(services: Services, tenant_id: UUID, agent_id: str) -> tuple[int, datetime]:
    async with tenant_transaction(services.pool, SCOPE, tenant_id) as conn:
        cur = await conn.execute(
            "SELECT desired_revision_id, desired_since FROM agent_instance WHERE id = %s",
            (agent_id,),
        )
        row = await cur.fetchone()
    assert row is not None
    return row["desired_revision_id"], row["desired_since"]


async def test_a_credential_revoked_during_its_lookup_is_not_cached(
    tenants: tuple[Tenant, Tenant], monkeypatch: pytest.MonkeyPatch
) -> None:
    a, _b = tenants
    await publish(a.app.state.services.pool, a.id, FILES)
    enrolled = (await a.enroll(await a.enrollment_token(), "race-1")).json()
    header = f"Bearer {enrolled['credential']}"
    cache = a.app.state.fleet.credentials
    real = fleet_agents.lookup_credentials
    read, resume = asyncio.Event(), asyncio.Event()

    async def paused(conn: Any, hashes: Any) -> Any:
        found = await real(conn, hashes)
        if not read.is_set():
            read.set()
            await resume.wait()
        return found

    monkeypatch.setattr(fleet_agents, "lookup_credentials", paused)
    lookup = asyncio.create_task(cache.identify(header))
    await read.wait()  # the lookup has read the credential, still valid
    async with a.http() as http:  # forgetting the agent revokes it (and notifies)
        assert (await http.delete(f"/api/v1/agents/{enrolled['agent_id']}")).status_code == 204
    cache.revoke(hashlib.sha256(enrolled["credential"].encode()).hexdigest())  # its notice
    resume.set()
    assert await lookup is not None  # answered from what it read
    assert await cache.identify(header) is None  # but not kept: the next lookup reads again
    async with client_for(a.app) as agent:
        refused = await agent.head(CONFIG, headers={"Authorization": header, **UA})
        assert refused.status_code == 401


async def test_a_failed_batch_is_written_with_the_next(
    tenants: tuple[Tenant, Tenant], monkeypatch: pytest.MonkeyPatch
) -> None:
    a, _b = tenants
    services: Services = a.app.state.services
    await publish(services.pool, a.id, FILES)
    enrolled = (await a.enroll(await a.enrollment_token(), "batch-1")).json()
    cred = {"Authorization": f"Bearer {enrolled['credential']}", **UA}
    real = fleet_serving.lock_agents
    calls = 0

    async def failing_once(conn: Any, tenant_id: UUID, ids: Any) -> None:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise psycopg.OperationalError("the connection was lost")
        await real(conn, tenant_id, ids)

    monkeypatch.setattr(fleet_serving, "lock_agents", failing_once)
    body = {"id": "batch-1", "version": "Telegraf 1.39.1", "schema": 1, "status": "OK"}
    async with client_for(a.app) as agent:
        r = await agent.post(HEARTBEAT, content=json.dumps(body), headers=cred)
        assert r.status_code == 200
    batcher = a.app.state.fleet.batcher
    await batcher.flush()
    await batcher.flush()
    assert calls >= 2
    async with a.http() as http:
        found = (await http.get(f"/api/v1/agents/{enrolled['agent_id']}")).json()
    assert found["health"] == "healthy"
    assert found["last_seen_at"] is not None
