"""Agent registration and credentials against the real gateway app, PostgreSQL and NATS:
registration writes the agent and its key and creates the JetStream consumer; the credential
is an EdDSA JWT of a platform signing key listed in the JWKS; proofs and names are checked."""

from __future__ import annotations

import time

import httpx
import jwt
import psycopg
from agentbus import broker
from agentbus.gateway.context import Gateway
from agentbus.gateway.testkit import SimAgent, enroll, make_world
from agentbus.ids import parse_id


async def test_register_and_issue_credential(
    gateway: Gateway, gateway_client: httpx.AsyncClient, agentbus_db: str
) -> None:
    world = await make_world(gateway, "acme")
    agent = await enroll(
        gateway_client, world, "reviewer",
        capabilities=[{"name": "code.review", "version": "1", "description": "Review a diff"}],
        harness="claude",
    )  # fmt: skip
    agent_uuid = parse_id("agt", agent.agent_id)
    with psycopg.connect(agentbus_db) as conn:
        row = conn.execute(
            "SELECT address, nats_consumer, inbox_subject, harness::text, capabilities, agent_card"
            " FROM agents"
        ).fetchone()
        key = conn.execute(
            "SELECT spiffe_id, fingerprint, expires_at - now() FROM agent_keys"
        ).fetchone()
    assert row is not None
    assert key is not None
    assert row[0] == "agent://acme/main/reviewer"
    assert row[1] == f"agt_{agent_uuid.hex}"
    assert (
        row[2]
        == f"t.{world.tenant_id.hex}.ws.{world.workspace_id.hex}.agent.{agent_uuid.hex}.inbox"
    )
    assert (row[3], row[4][0]["name"], row[5]["skills"][0]["id"]) == (
        "claude",
        "code.review",
        "code.review",
    )
    assert (
        key[0]
        == f"spiffe://acme.agentbus.exchange/ws/ws_{world.workspace_id.hex}/agent/{agent.agent_id}"
    )
    assert len(key[1]) == 43
    assert 89 <= key[2].days <= 90
    # The consumer exists with the platform constants of 05 §2.3.
    info = await gateway.broker.js.consumer_info(broker.stream_name(world.tenant_id), row[1])
    assert (info.config.max_deliver, info.config.ack_wait) == (10, 30)
    assert info.config.filter_subject == row[2]
    # The credential verifies with the JWKS key it names, and carries the documented claims.
    jwks = (await gateway_client.get("/.well-known/jwks.json")).json()["keys"]
    header = jwt.get_unverified_header(agent.credential)
    assert header["alg"] == "EdDSA"
    jwk = next(k for k in jwks if k["kid"] == header["kid"])
    public = jwt.PyJWK(jwk).key
    claims = jwt.decode(agent.credential, public, algorithms=["EdDSA"], audience="agentbus-gateway")
    assert claims["sub"] == agent.agent_id
    assert claims["ten"] == f"ten_{world.tenant_id.hex}"
    assert claims["key"] == agent.key_id
    assert claims["scp"] == ["send", "receive"]
    assert claims["exp"] - claims["iat"] == 900
    # The credential works on an agent route; refresh gives a new one.
    listed = await gateway_client.get("/v1/conversations", headers=agent.headers())
    assert listed.status_code == 200, listed.text
    refreshed = await gateway_client.post(
        "/v1/credentials/refresh",
        json={"proof": agent.proof(agent.agent_id, agent.key_id)},
        headers=agent.headers(),
    )
    assert refreshed.status_code == 200, refreshed.text
    assert refreshed.json()["agent_id"] == agent.agent_id


async def test_registration_errors(gateway: Gateway, gateway_client: httpx.AsyncClient) -> None:
    world = await make_world(gateway, "acme")
    token = {"Authorization": f"Bearer {world.token}"}
    agent = SimAgent("agent://acme/main/worker")

    async def register(**changes: object) -> httpx.Response:
        body = {"workspace": "main", "name": "worker", "public_key": agent.public_key,
                "proof": agent.proof(agent.address), **changes}  # fmt: skip
        return await gateway_client.post("/v1/agents", json=body, headers=token)

    def code(reply: httpx.Response) -> str:
        assert reply.headers["content-type"] == "application/problem+json"
        return str(reply.json()["code"])

    assert (
        code(await register(name="gateway", proof=agent.proof("agent://acme/main/gateway")))
        == "AB-3007"
    )
    assert code(await register(name="Bad_Name")) == "AB-8001"
    assert code(await register(public_key="AAAA")) == "AB-8001"
    assert code(await register(harness="vim")) == "AB-8001"
    other = SimAgent("agent://acme/main/worker")
    assert code(await register(proof=other.proof(agent.address))) == "AB-1009"
    assert code(await register(proof=agent.proof("agent://acme/main/other"))) == "AB-1009"
    assert (
        code(await register(proof=agent.proof(agent.address, iat=int(time.time()) - 600)))
        == "AB-1012"
    )
    proof = agent.proof(agent.address)
    first = await register(proof=proof)
    assert first.status_code == 201
    assert code(await register(proof=proof)) == "AB-1011"  # the same proof again
    again = await register()  # same key, same owner: a reinstalled sidecar
    assert again.status_code == 200
    assert again.json()["agent"]["id"] == first.json()["agent"]["id"]
    assert (
        code(await register(public_key=other.public_key, proof=other.proof(agent.address)))
        == "AB-3006"
    )
    no_auth = await gateway_client.post("/v1/agents", json={})
    assert code(no_auth) == "AB-1001"
    bogus = await gateway_client.post(
        "/v1/agents", json={}, headers={"Authorization": "Bearer ab_live_x"}
    )
    assert code(bogus) == "AB-1002"
    # A credential must be asked with a proof by one of the agent's own keys.
    agent_id, key_id = first.json()["agent"]["id"], first.json()["key"]["id"]
    path = f"/v1/agents/{agent_id}/credentials"
    wrong_key = await gateway_client.post(
        path, json={"proof": other.proof(agent_id, key_id)}, headers=token
    )
    assert code(wrong_key) == "AB-1009"
    garbage = await gateway_client.get(
        "/v1/conversations", headers={"Authorization": "Bearer e.y.J"}
    )
    assert code(garbage) == "AB-1005"
