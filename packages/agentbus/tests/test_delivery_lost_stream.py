"""A tenant stream that JetStream lost (a NATS server restarted without its data, a stream
deleted behind the gateway's back), on real PostgreSQL and NATS: the send that finds it gone is
accepted and left to the reconciler, which creates the stream again and publishes it; the sends
after it are published at once; the recipient's pull creates its consumer again and gets them
all, in order."""

from __future__ import annotations

from datetime import timedelta

import httpx
from agentbus import broker
from agentbus.gateway.context import Gateway
from agentbus.gateway.reconciler import Reconciler
from agentbus.gateway.testkit import alice_and_bob, poll_inbox, post_envelope, settle_inbox


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
