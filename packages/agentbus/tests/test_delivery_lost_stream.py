"""A tenant stream that JetStream lost (a NATS server restarted without its data, a stream
deleted behind the gateway's back), on real PostgreSQL and NATS: the send that finds it gone is
accepted and left to the reconciler, which creates the stream again and publishes it; the sends
after it are published at once; the recipient's pull creates its consumer again and gets them
all, in order. What the lost stream held goes out again: by itself when the gateway creates the
stream again, or when the operator republishes the tenant's waiting messages (05 §13.2)."""

from __future__ import annotations

from datetime import timedelta

import httpx
from agentbus import broker
from agentbus.actions import tenants
from agentbus.actions.context import Actor, Ctx
from agentbus.db import SCOPE
from agentbus.gateway.actions.reconciler import Reconciler
from agentbus.gateway.context import Gateway
from agentbus.gateway.testkit import (
    SimAgent,
    alice_and_bob,
    poll_inbox,
    post_envelope,
    settle_inbox,
)
from platformkit.db.scope import tenant_transaction


async def arrivals(client: httpx.AsyncClient, agent: SimAgent, count: int) -> dict[str, str]:
    """Message id -> text of what ``agent``'s pulls hand out, until ``count`` have come (the
    first pull creates the consumer again, and may answer before the rest is there)."""
    arrived: dict[str, str] = {}
    for _ in range(3):
        for d in (await poll_inbox(client, agent, wait_s=2))["deliveries"]:
            arrived[d["msg_id"]] = d["envelope"]["data"]["text"]
        if len(arrived) >= count:
            break
    return arrived


async def test_a_lost_stream_is_created_again_and_what_was_sent_meanwhile_arrives(
    gateway: Gateway, gateway_client: httpx.AsyncClient
) -> None:
    world, alice, bob = await alice_and_bob(gateway, gateway_client)
    env = alice.envelope(bob.address, {"text": "before"})
    await post_envelope(gateway_client, alice, env)
    [first] = (await poll_inbox(gateway_client, bob, wait_s=2))["deliveries"]
    [read] = await settle_inbox(gateway_client, bob, "read", [{"msg_id": first["msg_id"]}])
    assert read["result"] == "ok", read

    await gateway.broker.js.delete_stream(broker.stream_name(world.tenant_id))

    meanwhile = alice.envelope(bob.address, {"text": "meanwhile"}, conversation=env["conversation"])
    answer = await post_envelope(gateway_client, alice, meanwhile)
    assert answer["receipt"]["seq"] is None  # accepted; JetStream did not confirm
    assert await Reconciler(gateway, min_age=timedelta(0)).run_once() == 1
    after = alice.envelope(bob.address, {"text": "after"}, conversation=env["conversation"])
    answer = await post_envelope(gateway_client, alice, after)
    assert answer["receipt"]["seq"] == 2  # the stream exists again: published at once

    deliveries = (await poll_inbox(gateway_client, bob, wait_s=2))["deliveries"]
    assert [(d["msg_id"], d["envelope"]["data"]["text"]) for d in deliveries] == [
        (meanwhile["id"], "meanwhile"),
        (after["id"], "after"),
    ]


async def test_republishing_sends_what_the_lost_stream_held_again(
    gateway: Gateway, gateway_client: httpx.AsyncClient
) -> None:
    world, alice, bob = await alice_and_bob(gateway, gateway_client)
    cnv = alice.envelope(bob.address, {"text": "read"})["conversation"]
    sent = [
        alice.envelope(bob.address, {"text": text}, conversation=cnv)
        for text in ("read", "fetched", "waiting")
    ]
    await post_envelope(gateway_client, alice, sent[0])
    [first] = (await poll_inbox(gateway_client, bob, wait_s=2))["deliveries"]
    await settle_inbox(gateway_client, bob, "read", [{"msg_id": first["msg_id"]}])
    await post_envelope(gateway_client, alice, sent[1])
    [fetched] = (await poll_inbox(gateway_client, bob, wait_s=2))["deliveries"]  # never acked
    await post_envelope(gateway_client, alice, sent[2])

    await gateway.broker.js.delete_stream(broker.stream_name(world.tenant_id))
    operator = Ctx(gateway.pool, Actor.operator())
    assert await tenants.republish_undelivered(operator, world.tenant_id) == 2
    reconciler = Reconciler(gateway, min_age=timedelta(0))
    # the first publish finds the stream gone, the next ones create it and go out
    assert await reconciler.run_once() + await reconciler.run_once() == 2

    arrived = await arrivals(gateway_client, bob, 2)
    assert arrived == {fetched["msg_id"]: "fetched", sent[2]["id"]: "waiting"}
    assert (await poll_inbox(gateway_client, bob, wait_s=1))["deliveries"] == []


async def test_what_the_lost_stream_held_goes_out_again_when_the_stream_is_created_again(
    gateway: Gateway, gateway_client: httpx.AsyncClient
) -> None:
    world, alice, bob = await alice_and_bob(gateway, gateway_client)
    waiting = alice.envelope(bob.address, {"text": "waiting"})
    assert (await post_envelope(gateway_client, alice, waiting))["receipt"]["seq"] == 1

    await gateway.broker.js.delete_stream(broker.stream_name(world.tenant_id))
    later = alice.envelope(bob.address, {"text": "later"})
    assert (await post_envelope(gateway_client, alice, later))["receipt"]["seq"] is None
    reconciler = Reconciler(gateway, min_age=timedelta(0))
    # the stream is created again, which sends what it held out again with the reconciler
    assert await reconciler.run_once() + await reconciler.run_once() == 2

    arrived = await arrivals(gateway_client, bob, 2)
    assert arrived == {waiting["id"]: "waiting", later["id"]: "later"}
    async with tenant_transaction(gateway.pool, SCOPE, world.tenant_id) as conn:
        cur = await conn.execute(
            "SELECT actor_id, details FROM audit_actions WHERE action = 'tenant.republish'"
        )
        rows = await cur.fetchall()
    assert [(r["actor_id"], r["details"]["messages"]) for r in rows] == [
        ("gateway:stream-created", 1)
    ]
