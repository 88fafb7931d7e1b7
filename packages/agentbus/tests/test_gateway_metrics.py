"""The gateway's own metrics on /metrics (real app, PostgreSQL and NATS): a send accepted, a
repeat replayed, a refusal by its AB code, a delivery handed out, its read committed; and no
label that names a tenant, an agent or a message."""

from __future__ import annotations

from datetime import UTC, datetime

import httpx
from agentbus.gateway.context import Gateway
from agentbus.gateway.testkit import (
    alice_and_bob,
    poll_inbox,
    post_envelope,
    post_signed,
    settle_inbox,
)
from prometheus_client.parser import text_string_to_metric_families
from wirekit import canonical_json

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


async def scrape(client: httpx.AsyncClient) -> Samples:
    reply = await client.get("/metrics")
    assert reply.status_code == 200
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(reply.text)
        for sample in family.samples
        if sample.name.startswith("agentbus_")
    }


def grew(before: Samples, after: Samples, name: str, **labels: str) -> float:
    key = (name, tuple(sorted(labels.items())))
    return after.get(key, 0.0) - before.get(key, 0.0)


async def test_sends_deliveries_and_reads_are_counted(
    gateway: Gateway, gateway_client: httpx.AsyncClient
) -> None:
    _world, alice, bob = await alice_and_bob(gateway, gateway_client)
    before = await scrape(gateway_client)

    signed = alice.sign(alice.envelope(bob.address, {"text": "counted"}))
    await post_envelope(gateway_client, alice, signed)
    again = await gateway_client.post(
        "/v1/messages",
        content=canonical_json(signed),
        headers={**alice.headers(), "Content-Type": "application/cloudevents+json"},
    )
    assert again.status_code == 200, again.text  # the replay of an accepted id
    refused = await post_signed(
        gateway_client,
        alice,
        {**alice.envelope(bob.address, {"text": "x"}), "type": "agentbus.poke.v1"},
    )
    assert refused.json()["code"] == "AB-2006", refused.text
    deliveries = (await poll_inbox(gateway_client, bob, wait_s=5))["deliveries"]
    assert len(deliveries) == 1
    stamp = datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    reads = [{"msg_id": deliveries[0]["msg_id"], "read_at": stamp, "outcome": "read"}]
    assert (await settle_inbox(gateway_client, bob, "read", reads))[0]["result"] == "ok"

    after = await scrape(gateway_client)
    assert grew(before, after, "agentbus_sends_total", outcome="accepted") == 1
    assert grew(before, after, "agentbus_sends_total", outcome="replayed") == 1
    assert grew(before, after, "agentbus_sends_total", outcome="AB-2006") == 1
    assert grew(before, after, "agentbus_deliveries_total") == 1
    assert grew(before, after, "agentbus_message_status_total", status="read") == 1
    assert grew(before, after, "agentbus_publish_unconfirmed_total") == 0
    ids = {alice.agent_id, bob.agent_id, signed["id"]} | {d["msg_id"] for d in deliveries}
    for _name, labels in after:
        for _label, value in labels:
            assert not value.startswith(("ten_", "agt_", "msg_", "ws_")), labels
            assert value not in ids, labels
