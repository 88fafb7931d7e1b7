"""Byte compatibility with the sidecar: its key proofs register an agent and obtain a
credential, its signed envelopes (with every optional attribute) are accepted, and the envelope
the gateway rebuilds from the row verifies with the sidecar's own signature check."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import httpx
from agentbus.gateway.context import Gateway
from agentbus.gateway.testkit import make_world
from agentbus_sidecar.envelope import build_envelope, sign_envelope, verify_envelope
from agentbus_sidecar.keys import generate_key, key_proof, public_key_b64url
from platformkit.ids import uuid7
from wirekit import canonical_json


async def test_sidecar_envelopes_are_accepted_and_rebuilt_exactly(
    gateway: Gateway, gateway_client: httpx.AsyncClient
) -> None:
    world = await make_world(gateway, "acme")
    token = {"Authorization": f"Bearer {world.token}"}
    agents = {}
    for name in ("planner", "reviewer"):
        key, address = generate_key(), f"agent://acme/main/{name}"
        body = {"workspace": "main", "name": name, "public_key": public_key_b64url(key),
                "proof": key_proof(key, address, datetime.now(UTC))}  # fmt: skip
        reply = await gateway_client.post("/v1/agents", json=body, headers=token)
        assert reply.status_code == 201, reply.text
        agent_id, key_id = reply.json()["agent"]["id"], reply.json()["key"]["id"]
        proof = key_proof(key, agent_id, datetime.now(UTC), kid=key_id)
        issued = await gateway_client.post(
            f"/v1/agents/{agent_id}/credentials", json={"proof": proof}, headers=token
        )
        assert issued.status_code == 200, issued.text
        agents[name] = (key, address, key_id, issued.json()["access_token"])
    key, source, key_id, credential = agents["planner"]
    recipient = agents["reviewer"][1]
    envelope = sign_envelope(
        build_envelope(
            type="agentbus.message.v1",
            source=source,
            recipient=recipient,
            data={"text": "Grüße, ünïcode and numbers", "metadata": {"n": 1.5, "k": [1, None]}},
            key_id=key_id,
            correlation=f"msg_{uuid7().hex}",
            idempotency_key="note-1",
            capability="code.review",
            capability_ver="2",
            priority="high",
            expires=datetime.now(UTC) + timedelta(hours=1),
            replyto=source,
        ),
        key,
    )
    sent = await gateway_client.post(
        "/v1/messages",
        content=canonical_json(envelope),
        headers={"Authorization": f"Bearer {credential}", "Content-Type": "application/json"},
    )
    assert sent.status_code == 202, sent.text
    seq = sent.json()["receipt"]["seq"]
    copy = await gateway.broker.js.get_msg(f"T_{world.tenant_id.hex}", seq)
    assert copy.headers is not None
    assert 3590 <= int(copy.headers["Nats-TTL"]) <= 3600  # the copy goes when it expires
    read = await gateway_client.get(
        f"/v1/messages/{envelope['id']}",
        params={"include": "envelope"},
        headers={"Authorization": f"Bearer {agents['reviewer'][3]}"},
    )
    assert read.status_code == 200, read.text
    rebuilt = read.json()["envelope"]
    assert rebuilt == envelope
    verify_envelope(rebuilt, key.public_key())
