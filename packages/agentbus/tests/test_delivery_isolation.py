"""Cross-tenant isolation of delivery and tasks: an agent of another tenant can never receive,
ack, nak, refuse, read or look up a tenant's message or task, through the API (its token and
credential are bound to its own tenant and agent) or through the store (RLS)."""

from __future__ import annotations

import httpx
from agentbus.db import SCOPE
from agentbus.delivery import outcomes, store
from agentbus.delivery.domain import Status
from agentbus.gateway.context import Gateway
from agentbus.gateway.testkit import enroll, make_world, post_envelope
from agentbus.ids import parse_id
from agentbus.tasks import store as task_store
from platformkit.db.scope import tenant_transaction

SCHEMA = "https://agentbus.exchange/schemas/"


async def test_another_tenant_can_neither_receive_nor_settle(
    gateway: Gateway, gateway_client: httpx.AsyncClient
) -> None:
    client = gateway_client
    acme, globex = await make_world(gateway, "acme"), await make_world(gateway, "globex")
    alice = await enroll(client, acme, "alice")
    bob = await enroll(client, acme, "bob", capabilities=[{"name": "code.review"}])
    # Same agent name in the other tenant: nothing but the tenant tells them apart.
    eve = await enroll(client, globex, "bob")

    request = alice.envelope(bob.address, {"instructions": "review"})
    request.update(
        type="agentbus.task.request.v1",
        dataschema=f"{SCHEMA}agentbus.task.request.v1.json",
        subject="tsk_" + request["id"][4:],
        idempotencykey="k",
        capability="code.review",
    )
    await post_envelope(client, alice, request, "/v1/tasks")

    polled = await client.get("/v1/inbox", params={"wait_s": 1}, headers=eve.headers())
    assert polled.json()["deliveries"] == []
    [delivery] = (
        await client.get("/v1/inbox", params={"wait_s": 5}, headers=bob.headers())
    ).json()["deliveries"]
    token, msg_id = delivery["ack_token"], request["id"]

    bodies = {
        "ack": {"acks": [{"msg_id": msg_id, "ack_token": token}]},
        "nak": {"naks": [{"msg_id": msg_id, "ack_token": token, "delay_ms": 0}]},
        "term": {"terms": [{"msg_id": msg_id, "ack_token": token, "reason": "schema_unknown"}]},
        "read": {"reads": [{"msg_id": msg_id}]},
    }
    for verb, body in bodies.items():
        reply = await client.post(f"/v1/inbox/{verb}", json=body, headers=eve.headers())
        assert reply.status_code == 200, reply.text
        assert reply.json()["results"] == [{"msg_id": msg_id, "result": "invalid"}], verb

    for path in (f"/v1/tasks/{request['subject']}", f"/v1/tasks/{request['subject']}/transitions"):
        reply = await client.get(path, headers=eve.headers())
        assert (reply.status_code, reply.json()["code"]) == (404, "AB-6001")
    assert (await client.get("/v1/tasks", headers=eve.headers())).json()["items"] == []

    # Nothing moved: the message is still fetched by bob, the task still submitted.
    seen = await client.get(f"/v1/tasks/{request['subject']}", headers=alice.headers())
    assert seen.json()["state"] == "submitted"
    ok = await client.post("/v1/inbox/ack", json=bodies["ack"], headers=bob.headers())
    assert ok.json()["results"][0]["result"] == "ok"


async def test_row_level_security_hides_the_rows_from_another_tenant_scope(
    gateway: Gateway, gateway_client: httpx.AsyncClient
) -> None:
    client = gateway_client
    acme, globex = await make_world(gateway, "acme"), await make_world(gateway, "globex")
    alice, bob = await enroll(client, acme, "alice"), await enroll(client, acme, "bob")
    env = alice.envelope(bob.address, {"text": "private"})
    await post_envelope(client, alice, env, "/v1/messages")
    await client.get("/v1/inbox", params={"wait_s": 5}, headers=bob.headers())
    msg, agent = parse_id("msg", env["id"]), parse_id("agt", bob.agent_id)

    # globex's scope, asking with acme's ids: no rows, and writes change nothing.
    async with tenant_transaction(gateway.pool, SCOPE, globex.tenant_id) as conn:
        assert await store.load(conn, acme.tenant_id, {msg: agent}) == {}
        assert await store.load(conn, globex.tenant_id, {msg: agent}) == {}
        assert await store.lock(conn, globex.tenant_id, agent, msg) is None
        assert await task_store.get_task(conn, acme.tenant_id, msg) is None
        async with tenant_transaction(gateway.pool, SCOPE, acme.tenant_id) as acme_conn:
            row = await store.lock(acme_conn, acme.tenant_id, agent, msg)
        assert row is not None
        delivered = Status.DELIVERED
        assert not await outcomes.acknowledge(conn, acme.tenant_id, [row], delivered, [None])
        assert not await outcomes.dead_letter(conn, globex.tenant_id, row, "max_deliveries")
        cur = await conn.execute("SELECT count(*) AS n FROM delivery_state")
        assert (await cur.fetchone()) == {"n": 0}
    async with tenant_transaction(gateway.pool, SCOPE, acme.tenant_id) as conn:
        row = await store.lock(conn, acme.tenant_id, agent, msg)
    assert row is not None
    assert (row["status"], row["transport_acked_at"]) == ("fetched", None)
