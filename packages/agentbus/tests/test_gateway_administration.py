"""Administration over the API (04-API-SPEC §10.1-10.4) against the real gateway app and
PostgreSQL: the tenant, workspaces, users and tokens for a tenant-wide token with admin; a new
token never stronger than its maker; revocation ends a token at once; the tenant's own changes,
and its crypto-shredding with the retention job's hard deletes after it; the audit rows."""

from __future__ import annotations

import uuid
from dataclasses import replace
from typing import Any

import httpx
import nats.js.errors
import psycopg
import pytest
from agentbus import broker
from agentbus.actions import users
from agentbus.actions.context import Actor, Ctx
from agentbus.actions.users import OwnerSpec
from agentbus.controllers.retention import Retention
from agentbus.db import SCOPE
from agentbus.gateway.actions.payloads import load_payload
from agentbus.gateway.context import Gateway
from agentbus.gateway.domain.errors import KeyUnavailable
from agentbus.gateway.store import messages
from agentbus.gateway.store.objectstore import ObjectMissing
from agentbus.gateway.testkit import World, enroll, make_world, owner_token, send_message
from agentbus.ids import format_id, parse_id
from agentbus.store import plans
from agentbus.store.audit_actions import list_audit_actions
from agentbus.store.integration_tokens import verify_integration_token
from platformkit.db.scope import tenant_transaction
from platformkit.ids import uuid7

Json = dict[str, Any]


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def call(
    client: httpx.AsyncClient, method: str, path: str, headers: dict[str, str], status: int,
    **kwargs: Any,
) -> Json:  # fmt: skip
    reply = await client.request(method, path, headers=headers, **kwargs)
    assert reply.status_code == status, reply.text
    return dict(reply.json())


async def acme_and_dana(gateway: Gateway) -> tuple[World, uuid.UUID, Json]:
    """Tenant acme, its owner's id, and dana, a plain member of the tenant."""
    world = await make_world(gateway, "acme")
    owner_id = (await verify_integration_token(gateway.pool, world.token)).owner_user_id
    dana = await users.create_user(
        Ctx(gateway.pool, Actor.user(world.tenant_id, owner_id)), world.tenant_id,
        OwnerSpec("dana@acme.example", "oidc:test", "dana"),
    )  # fmt: skip
    return world, owner_id, dana


async def test_an_admin_token_manages_its_tenant(
    gateway: Gateway, gateway_client: httpx.AsyncClient
) -> None:
    client, world = gateway_client, await make_world(gateway, "acme")
    admin = bearer(world.token)
    tenant = await call(client, "GET", f"/v1/tenants/{format_id('ten', world.tenant_id)}",
                        admin, 200)  # fmt: skip
    assert (tenant["slug"], tenant["retention_days"]) == ("acme", 7)
    assert tenant["limits"]["workspaces"] >= 1
    other = await make_world(gateway, "globex")
    await call(client, "GET", f"/v1/tenants/{format_id('ten', other.tenant_id)}", admin, 404)

    async with tenant_transaction(gateway.pool, SCOPE, world.tenant_id) as conn:
        await plans.override_limits(conn, world.tenant_id, {"workspaces": 3})
    body = {"slug": "platform", "display_name": "Platform", "description": "infra agents"}
    created = await call(client, "POST", "/v1/workspaces", admin, 201, json=body)
    assert created["id"].startswith("ws_")
    problem = await call(client, "POST", "/v1/workspaces", admin, 409, json=body)
    assert problem["code"] == "AB-8003"
    listed = await call(client, "GET", "/v1/workspaces", admin, 200)
    assert [w["slug"] for w in listed["items"]] == ["main", "platform"]
    assert await call(client, "GET", f"/v1/workspaces/{created['id']}", admin, 200) == created
    await call(client, "GET", "/v1/workspaces/ws_nope", admin, 404)

    [owner] = (await call(client, "GET", "/v1/users", admin, 200))["items"]
    assert (owner["email"], owner["tenant_role"]) == ("owner@acme.example", "owner")
    assert await call(client, "GET", f"/v1/users/{owner['id']}", admin, 200) == owner

    ask = {"name": "ci-runner", "env": "test", "workspace": created["id"],
           "scopes": ["send", "receive"], "expires_at": "2099-01-01T00:00:00.000Z"}  # fmt: skip
    minted = await call(client, "POST", "/v1/tokens", admin, 201, json=ask)
    plaintext = minted.pop("token")
    assert plaintext.startswith("ab_test_")
    assert (minted["workspace_id"], minted["scopes"], minted["owner_user_id"]) == (
        created["id"], ["send", "receive"], owner["id"],
    )  # fmt: skip
    listed_tokens = await call(client, "GET", "/v1/tokens", admin, 200)
    assert minted["id"] in [t["id"] for t in listed_tokens["items"]]
    assert plaintext not in str(listed_tokens)
    await call(client, "GET", "/v1/agents", bearer(plaintext), 200)  # it works
    used = await call(client, "GET", f"/v1/tokens/{minted['id']}", admin, 200)
    assert used["last_used_ip"] == "127.0.0.1", "an address, not a network"

    revoked = await call(client, "DELETE", f"/v1/tokens/{minted['id']}", admin, 200,
                         json={"reason": "rotated"})  # fmt: skip
    assert (revoked["revoked_reason"], revoked["revoked_at"] is not None) == ("rotated", True)
    problem = await call(client, "GET", "/v1/agents", bearer(plaintext), 401)
    assert problem["code"] == "AB-1003"
    again = await call(client, "DELETE", f"/v1/tokens/{minted['id']}", admin, 200, json={})
    assert again["revoked_at"] == revoked["revoked_at"]
    assert minted["id"] not in [
        t["id"] for t in (await call(client, "GET", "/v1/tokens", admin, 200))["items"]
    ]
    shown = await call(client, "GET", f"/v1/tokens/{minted['id']}", admin, 200)
    assert shown["revoked_reason"] == "rotated"

    async with tenant_transaction(gateway.pool, SCOPE, world.tenant_id) as conn:
        actions = await list_audit_actions(conn, world.tenant_id)
    made = [a for a in actions if a["action"] in ("token.create", "token.revoke")]
    assert [(a["action"], a["actor_id"]) for a in made[:2]] == [
        ("token.revoke", owner["id"]), ("token.create", owner["id"]),
    ]  # fmt: skip


async def test_who_may_administer(gateway: Gateway, gateway_client: httpx.AsyncClient) -> None:
    client, world = gateway_client, await make_world(gateway, "acme")
    only_admin = await owner_token(gateway, world, ["admin"])
    ask = {"name": "stronger", "scopes": ["send"]}
    problem = await call(client, "POST", "/v1/tokens", only_admin, 403, json=ask)
    assert (problem["code"], problem["scope"]) == ("AB-1007", "send")
    ask_admin = {"name": "peer", "scopes": ["admin"]}
    await call(client, "POST", "/v1/tokens", only_admin, 201, json=ask_admin)
    sender = await owner_token(gateway, world, ["send"])
    assert (await call(client, "GET", "/v1/workspaces", sender, 403))["code"] == "AB-1007"
    bound = await owner_token(gateway, world, ["admin"], world.workspace_id)
    assert (await call(client, "GET", "/v1/tokens", bound, 403))["code"] == "AB-1015"
    bad = {"name": "x", "scopes": ["send"], "workspace": "ws_nope"}
    assert (await call(client, "POST", "/v1/tokens", bearer(world.token), 422, json=bad))[
        "code"
    ] == "AB-8001"
    made_up = {"name": "x", "scopes": ["everything"]}
    assert (await call(client, "POST", "/v1/tokens", only_admin, 422, json=made_up))[
        "code"
    ] == "AB-8001"
    unknown = {"name": "x", "scopes": ["send"], "extra": True}
    await call(client, "POST", "/v1/tokens", bearer(world.token), 422, json=unknown)


async def test_workspaces_change_and_go_once_empty(
    gateway: Gateway, gateway_client: httpx.AsyncClient
) -> None:
    client, world = gateway_client, await make_world(gateway, "acme")
    admin = bearer(world.token)
    async with tenant_transaction(gateway.pool, SCOPE, world.tenant_id) as conn:
        await plans.override_limits(conn, world.tenant_id, {"workspaces": 3})
    made = await call(client, "POST", "/v1/workspaces", admin, 201,
                      json={"slug": "platform", "display_name": "Platform"})  # fmt: skip
    path = f"/v1/workspaces/{made['id']}"
    change = {"display_name": "Platform team", "description": "infra", "settings": {"a": 1}}
    changed = await call(client, "PATCH", path, admin, 200, json=change)
    assert (changed["display_name"], changed["description"], changed["settings"]) == (
        "Platform team", "infra", {"a": 1},
    )  # fmt: skip
    assert (await call(client, "PATCH", path, admin, 200, json={"description": None}))[
        "description"
    ] is None
    await call(client, "PATCH", path, admin, 422, json={"display_name": None})
    await call(client, "PATCH", path, admin, 422, json={"slug": "renamed"})

    platform = replace(world, workspace_id=parse_id("ws", made["id"]), workspace="platform")
    agent = await enroll(client, platform, "builder")
    problem = await call(client, "DELETE", path, admin, 409)
    assert (problem["code"], problem["agents"]) == ("AB-8008", 1)
    reply = await client.delete(f"/v1/agents/{agent.agent_id}", headers=admin)
    assert reply.status_code == 204, reply.text
    assert (await client.delete(path, headers=admin)).status_code == 204
    await call(client, "GET", path, admin, 404)
    await call(client, "PATCH", path, admin, 404, json={"description": "gone"})
    listed = await call(client, "GET", "/v1/workspaces", admin, 200)
    assert [w["slug"] for w in listed["items"]] == ["main"]


async def test_users_are_disabled_and_promoted_but_never_leave_the_tenant_ownerless(
    gateway: Gateway, gateway_client: httpx.AsyncClient
) -> None:
    client, (world, owner_id, dana) = gateway_client, await acme_and_dana(gateway)
    admin = bearer(world.token)
    dana_id = format_id("usr", dana["id"])
    main = format_id("ws", world.workspace_id)
    ask = {"name": "dana-laptop", "scopes": ["send"], "workspace": main, "owner": dana_id}
    laptop = await call(client, "POST", "/v1/tokens", admin, 201, json=ask)

    disabled = await call(client, "PATCH", f"/v1/users/{dana_id}", admin, 200,
                          json={"status": "disabled"})  # fmt: skip
    assert (disabled["status"], disabled["active_tokens"]) == ("disabled", [laptop["id"]])
    me = format_id("usr", owner_id)
    problem = await call(client, "PATCH", f"/v1/users/{me}", admin, 409,
                         json={"tenant_role": "admin"})  # fmt: skip
    assert problem["code"] == "AB-8008"
    await call(client, "PATCH", f"/v1/users/{me}", admin, 409, json={"status": "disabled"})
    await call(client, "PATCH", f"/v1/users/{dana_id}", admin, 200,
               json={"status": "active", "tenant_role": "owner"})  # fmt: skip
    demoted = await call(client, "PATCH", f"/v1/users/{me}", admin, 200,
                         json={"tenant_role": "admin"})  # fmt: skip
    assert demoted["tenant_role"] == "admin"
    problem = await call(client, "PATCH", f"/v1/users/{dana_id}", admin, 403,
                         json={"tenant_role": "member"})  # fmt: skip
    assert problem["code"] == "AB-1008", "only an owner changes an owner"
    await call(client, "PATCH", f"/v1/users/{dana_id}", admin, 422, json={"status": "invited"})


async def test_a_workspace_admin_added_over_the_api_manages_its_agents(
    gateway: Gateway, gateway_client: httpx.AsyncClient
) -> None:
    client, (world, owner_id, dana) = gateway_client, await acme_and_dana(gateway)
    admin = bearer(world.token)
    dana_id, main = format_id("usr", dana["id"]), format_id("ws", world.workspace_id)
    ask = {"name": "dana", "scopes": ["register"], "workspace": main, "owner": dana_id}
    danas = bearer((await call(client, "POST", "/v1/tokens", admin, 201, json=ask))["token"])
    builder = await enroll(client, world, "builder")  # the owner's agent
    agent_path = f"/v1/agents/{builder.agent_id}"
    disable = {"status": "disabled"}
    problem = await call(client, "PATCH", agent_path, danas, 403, json=disable)
    assert problem["code"] == "AB-1008", "a plain member may not manage another's agent"

    members = f"/v1/workspaces/{main}/members"
    added = await call(client, "PUT", f"{members}/{dana_id}", admin, 200, json={"role": "admin"})
    assert (added["role"], added["invited_by"]) == ("admin", format_id("usr", owner_id))
    listed = await call(client, "GET", members, admin, 200)
    assert [(m["user_id"], m["role"]) for m in listed["items"]] == [(dana_id, "admin")]
    assert (await call(client, "PATCH", agent_path, danas, 200, json=disable))["status"] == (
        "disabled"
    )

    stranger = f"{members}/{format_id('usr', uuid7())}"  # not a member of the tenant
    problem = await call(client, "PUT", stranger, admin, 409, json={"role": "member"})
    assert problem["code"] == "AB-8008"
    await call(client, "PUT", f"{members}/{dana_id}", admin, 422, json={"role": "owner"})
    # dana is the workspace's last admin: neither demoted nor removed until another is one
    last = await call(client, "PUT", f"{members}/{dana_id}", admin, 409, json={"role": "member"})
    assert last["code"] == "AB-8008", last
    assert "last admin" in last["detail"], last
    assert (await call(client, "DELETE", f"{members}/{dana_id}", admin, 409))["code"] == "AB-8008"
    owner = f"{members}/{format_id('usr', owner_id)}"
    await call(client, "PUT", owner, admin, 200, json={"role": "admin"})
    assert (await client.delete(f"{members}/{dana_id}", headers=admin)).status_code == 204
    await call(client, "DELETE", f"{members}/{dana_id}", admin, 404)
    enable = {"status": "registered"}
    assert (await call(client, "PATCH", agent_path, danas, 403, json=enable))["code"] == "AB-1008"


async def test_the_tenant_changes_its_name_settings_and_on_enterprise_its_retention(
    gateway: Gateway, gateway_client: httpx.AsyncClient, agentbus_db: str
) -> None:
    client, world = gateway_client, await make_world(gateway, "acme")
    admin, path = bearer(world.token), f"/v1/tenants/{format_id('ten', world.tenant_id)}"
    await enroll(client, world, "builder")  # the tenant's stream now exists
    change = {"display_name": "Acme Inc", "settings": {"locale": "en-GB"}}
    changed = await call(client, "PATCH", path, admin, 200, json=change)
    assert (changed["display_name"], changed["settings"]) == ("Acme Inc", {"locale": "en-GB"})
    assert (changed["retention_days"], changed["limits"]["retention_days"]) == (7, 7)
    assert await call(client, "GET", path, admin, 200) == changed

    problem = await call(client, "PATCH", path, admin, 422, json={"retention_days": 30})
    assert (problem["code"], problem["field"]) == ("AB-8001", "retention_days"), "starter plan"
    for bad in ({"display_name": None}, {"display_name": ""}, {"plan": "enterprise"}):
        assert (await call(client, "PATCH", path, admin, 422, json=bad))["code"] == "AB-8001"
    other = f"/v1/tenants/{format_id('ten', uuid7())}"
    assert (await call(client, "PATCH", other, admin, 404, json=change))["code"] == "AB-8002"
    bound = await owner_token(gateway, world, ["admin"], world.workspace_id)
    assert (await call(client, "PATCH", path, bound, 403, json=change))["code"] == "AB-1015"

    with psycopg.connect(agentbus_db) as conn:  # an operator's plan change
        conn.execute("UPDATE tenants SET plan = 'enterprise' WHERE id = %s", (world.tenant_id,))
    longer = await call(client, "PATCH", path, admin, 200, json={"retention_days": 90})
    assert longer["retention_days"] == 90
    info = await gateway.broker.js.stream_info(broker.stream_name(world.tenant_id))
    assert info.config.max_age == 90 * 86400, "the stream keeps messages as long"
    await call(client, "PATCH", path, admin, 422, json={"retention_days": 0})
    async with tenant_transaction(gateway.pool, SCOPE, world.tenant_id) as conn:
        actions = await list_audit_actions(conn, world.tenant_id)
    updates = [a["details"] for a in actions if a["action"] == "tenant.update"]
    assert updates[0] == {"changed": ["retention_days"], "retention_days": [7, 90]}
    assert updates[1] == {"changed": ["display_name", "settings"]}


async def test_the_owner_crypto_shreds_the_tenant(
    gateway: Gateway, gateway_client: httpx.AsyncClient, agentbus_db: str
) -> None:
    client, (world, _owner_id, dana) = gateway_client, await acme_and_dana(gateway)
    admin, name = bearer(world.token), format_id("ten", world.tenant_id)
    path = f"/v1/tenants/{name}"
    alice, bob = await enroll(client, world, "alice"), await enroll(client, world, "bob")
    sent = await send_message(client, alice, bob, {"text": "shred me"})
    upload = {**alice.headers(), "Content-Type": "text/plain"}
    blob = (await client.post("/v1/blobs", content=b"a file", headers=upload)).json()
    async with tenant_transaction(gateway.pool, SCOPE, world.tenant_id) as conn:
        row = await messages.find_message(conn, world.tenant_id, parse_id("msg", sent))
    assert row is not None
    assert await load_payload(gateway, row) == {"text": "shred me"}

    assert (await call(client, "DELETE", path, admin, 428))["code"] == "AB-8010"
    wrong = {**admin, "AgentBus-Confirm": format_id("ten", uuid7())}
    assert (await call(client, "DELETE", path, wrong, 428))["code"] == "AB-8010"
    dana_id = format_id("usr", dana["id"])
    await call(client, "PATCH", f"/v1/users/{dana_id}", admin, 200, json={"tenant_role": "admin"})
    ask = {"name": "dana", "scopes": ["admin"], "owner": dana_id}
    danas = bearer((await call(client, "POST", "/v1/tokens", admin, 201, json=ask))["token"])
    confirm = {"AgentBus-Confirm": name}
    problem = await call(client, "DELETE", path, {**danas, **confirm}, 403)
    assert problem["code"] == "AB-1008", "an admin is not the owner"

    gone = await call(client, "DELETE", path, {**admin, **confirm}, 202)
    assert (gone["id"], gone["status"]) == (name, "deleting")
    with pytest.raises(KeyUnavailable):
        await load_payload(gateway, row)
    with psycopg.connect(agentbus_db) as conn:
        keys = conn.execute(
            "SELECT status, dek_wrapped FROM tenant_keys WHERE tenant_id = %s", (world.tenant_id,)
        ).fetchall()
    assert keys
    assert all(status == "destroyed" and not any(wrapped) for status, wrapped in keys)
    assert (await call(client, "GET", "/v1/workspaces", admin, 401))["code"] == "AB-1003"
    refused = await client.get("/v1/inbox", headers=bob.headers())
    assert refused.status_code == 403, refused.text
    with pytest.raises(nats.js.errors.NotFoundError):
        await gateway.broker.js.stream_info(broker.stream_name(world.tenant_id))
    async with tenant_transaction(gateway.pool, SCOPE, world.tenant_id) as conn:
        actions = await list_audit_actions(conn, world.tenant_id)
        agents_left = await conn.execute("SELECT DISTINCT status::text FROM agents")
        assert [r["status"] for r in await agents_left.fetchall()] == ["disabled"]
    [deleted] = [a for a in actions if a["action"] == "tenant.delete"]
    assert deleted["details"] == {
        "slug": "acme", "tokens_revoked": 2, "agents_disabled": 2, "keys_destroyed": 1,
    }  # fmt: skip

    # Step 4, at the retention job's next run: every message and blob goes, with its object.
    async with tenant_transaction(gateway.pool, SCOPE, world.tenant_id) as conn:
        found = await conn.execute("SELECT s3_key FROM blobs WHERE id = %s",
                                   (parse_id("blb", blob["id"]),))  # fmt: skip
        blob_key = (await found.fetchone())["s3_key"]
    assert await Retention(gateway.pool, gateway.objects).run_once() == 1
    for key in (row["payload_ref"], blob_key):
        with pytest.raises(ObjectMissing):
            await gateway.objects.get(key)
    with psycopg.connect(agentbus_db) as conn:
        left = conn.execute(
            """SELECT (SELECT status::text FROM tenants WHERE id = %(t)s),
                      (SELECT count(*) FROM messages WHERE tenant_id = %(t)s),
                      (SELECT count(*) FROM blobs WHERE tenant_id = %(t)s),
                      (SELECT count(*) FROM audit_actions
                        WHERE tenant_id = %(t)s AND action = 'tenant.deleted')""",
            {"t": world.tenant_id},
        ).fetchone()
    assert left == ("deleted", 0, 0, 1)
    assert await Retention(gateway.pool, gateway.objects).run_once() == 0, "nothing left to do"
