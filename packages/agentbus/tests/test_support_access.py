"""Support access with consent against the real gateway app and PostgreSQL, the support reads
logged in as agentbus_support: nothing without a window, the tenant's metadata inside one (and
never another tenant's), nothing once it is closed or has ended; each read in the tenant's
audit log and chain, naming the window."""

from __future__ import annotations

import asyncio
import json
import uuid

import httpx
import psycopg
import pytest
from agentbus import db
from agentbus.cli import app as cli_app
from agentbus.errors import SupportConsentRequired
from agentbus.gateway.context import Gateway
from agentbus.gateway.testkit import alice_and_bob, make_world, owner_token, send_message
from agentbus.ids import format_id
from agentbus.support_console import support_read
from platformkit.db.scope import Pool, tenant_transaction
from typer.testing import CliRunner


async def _raw_messages(pool: Pool, tenant: uuid.UUID) -> int:
    """What row-level security lets the support role see of ``tenant``, asked directly."""
    async with tenant_transaction(pool, db.SCOPE, tenant) as conn:
        query = "SELECT count(*) AS n FROM messages WHERE tenant_id = %s"
        row = await (await conn.execute(query, (tenant,))).fetchone()
    assert row is not None
    return int(row["n"])


async def test_support_reads_only_inside_an_open_consent(
    gateway: Gateway,
    gateway_client: httpx.AsyncClient,
    agentbus_support_pool: Pool,
    agentbus_db: str,
) -> None:
    client, support = gateway_client, agentbus_support_pool
    world, alice, bob = await alice_and_bob(gateway, client)
    other = await make_world(gateway, "globex")
    sent = [await send_message(client, alice, bob, {"text": f"m{i}"}) for i in range(3)]
    owner = {"Authorization": f"Bearer {world.token}"}
    auditor = await owner_token(gateway, world, ["read_audit"])

    with pytest.raises(SupportConsentRequired):
        await support_read(support, world.tenant_id, "staff-7", "messages")
    assert await _raw_messages(support, world.tenant_id) == 0

    assert (await client.post("/v1/support/consents", json={"hours": 200},
                              headers=owner)).json()["code"] == "AB-8001"  # fmt: skip
    assert (await client.post("/v1/support/consents", json={"hours": 1},
                              headers=auditor)).json()["code"] == "AB-1007"  # fmt: skip
    granted = await client.post(
        "/v1/support/consents", json={"hours": 1, "ticket_ref": "SUP-42"}, headers=owner
    )
    assert granted.status_code == 201, granted.text
    consent = granted.json()
    assert consent["scope"] == {"payloads": False}

    rows = await support_read(support, world.tenant_id, "staff-7", "messages")
    assert {format_id("msg", r["id"]) for r in rows} == set(sent)
    with pytest.raises(SupportConsentRequired):  # the window is this tenant's alone
        await support_read(support, other.tenant_id, "staff-7", "agents")
    assert await _raw_messages(support, other.tenant_id) == 0

    # the operator's command reads the same, as the support role
    env = {"AGENTBUS_DATABASE_URL": agentbus_db}
    tenant = format_id("ten", world.tenant_id)
    command = ["support", "read", "--tenant", tenant, "--staff", "staff-8", "agents"]
    listed = await asyncio.to_thread(CliRunner().invoke, cli_app, command, env=env)
    assert listed.exit_code == 0, listed.output
    assert {a["name"] for a in json.loads(listed.output)} == {"alice", "bob"}

    # every read is in the tenant's audit log, naming the window
    reads = (await client.get("/v1/audit/actions?action=support.read", headers=auditor)).json()
    assert [(r["actor_type"], r["actor_id"], r["target_type"]) for r in reads["items"]] == [
        ("support", "staff-8", "agents"), ("support", "staff-7", "messages")]  # fmt: skip
    assert {r["consent_ref"] for r in reads["items"]} == {consent["id"]}
    chain = (await client.get("/v1/audit/events?limit=1000", headers=auditor)).json()["items"]
    assert [e["actor"] for e in chain if e["summary"].startswith("support.read")] == [
        "support:staff-7", "support:staff-8"]  # fmt: skip
    assert (await client.get("/v1/audit/verify", headers=auditor)).json()["ok"]

    # closed by the owner: nothing more
    closed = await client.delete(f"/v1/support/consents/{consent['id']}", headers=owner)
    assert closed.status_code == 200, closed.text
    assert closed.json()["revoked_at"] is not None
    with pytest.raises(SupportConsentRequired):
        await support_read(support, world.tenant_id, "staff-7", "messages")
    assert await _raw_messages(support, world.tenant_id) == 0
    refused = await asyncio.to_thread(CliRunner().invoke, cli_app, command, env=env)
    assert refused.exit_code != 0
    assert "AB-4005" in refused.output

    # a second window that runs out: nothing after its end
    again = (await client.post("/v1/support/consents", json={"hours": 1}, headers=owner)).json()
    assert await support_read(support, world.tenant_id, "staff-7", "tasks") == []
    with psycopg.connect(agentbus_db) as conn:  # the hour passes
        conn.execute("UPDATE support_consents SET starts_at = now() - interval '2 hours',"
                     " ends_at = now() - interval '1 second' WHERE id = %s",
                     (uuid.UUID(again["id"]),))  # fmt: skip
    with pytest.raises(SupportConsentRequired):
        await support_read(support, world.tenant_id, "staff-7", "messages")
    assert await _raw_messages(support, world.tenant_id) == 0
    listed_consents = (await client.get("/v1/support/consents", headers=owner)).json()["items"]
    assert {c["id"] for c in listed_consents} == {consent["id"], again["id"]}
    grants = (await client.get("/v1/audit/actions?action=support.consent.grant",
                               headers=auditor)).json()["items"]  # fmt: skip
    assert len(grants) == 2
