"""Helpers for gateway tests: a tenant with a workspace and its bootstrap token, and agents
that register, prove their key and sign envelopes the way a sidecar does (conventions §5).
The fixtures that start the app are in ``agentbus.gateway.testing``."""

from __future__ import annotations

import secrets
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import httpx
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from platformkit.ids import uuid7
from wirekit import canonical_json

from agentbus.actions import tenants, workspaces
from agentbus.actions.context import Actor, Ctx
from agentbus.actions.users import OwnerSpec
from agentbus.gateway.context import Gateway
from agentbus.gateway.signing import raw_public
from agentbus.gateway.wire import b64url_encode, format_ts, uuid7_time
from agentbus.ids import format_id

SCHEMA = "https://agentbus.exchange/schemas/"
TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


@dataclass
class World:
    """A tenant with one workspace and its tenant-wide bootstrap token (every scope)."""

    tenant_id: uuid.UUID
    slug: str
    workspace_id: uuid.UUID
    workspace: str
    token: str = field(repr=False)


@dataclass
class SimAgent:
    """An agent as a sidecar holds it: its key, its ids once registered, its credential."""

    address: str
    key: Ed25519PrivateKey = field(default_factory=Ed25519PrivateKey.generate, repr=False)
    agent_id: str = ""
    key_id: str = ""
    credential: str = field(default="", repr=False)

    @property
    def public_key(self) -> str:
        return b64url_encode(raw_public(self.key.public_key()))

    def proof(self, subject: str, kid: str | None = None, *, iat: int | None = None) -> str:
        header = {"alg": "EdDSA", "typ": "agentbus-key-proof+jwt"} | ({"kid": kid} if kid else {})
        now = int(time.time()) if iat is None else iat
        claims = {
            "iss": subject, "sub": subject, "aud": "agentbus-gateway",
            "iat": now, "exp": now + 60, "jti": secrets.token_hex(16),
        }  # fmt: skip
        signing_input = (
            f"{b64url_encode(canonical_json(header))}.{b64url_encode(canonical_json(claims))}"
        )
        return f"{signing_input}.{b64url_encode(self.key.sign(signing_input.encode()))}"

    def envelope(self, recipient: str, data: dict[str, Any], **attrs: Any) -> dict[str, Any]:
        """An unsigned ``agentbus.message.v1`` envelope; ``attrs`` override or add members."""
        msg_id = uuid7()
        env = {
            "specversion": "1.0", "id": format_id("msg", msg_id), "source": self.address,
            "type": "agentbus.message.v1", "time": format_ts(uuid7_time(msg_id)),
            "datacontenttype": "application/json",
            "dataschema": f"{SCHEMA}agentbus.message.v1.json",
            "recipient": recipient, "conversation": format_id("cnv", uuid7()),
            "priority": "normal", "traceparent": TRACEPARENT, "keyid": self.key_id, "data": data,
        }  # fmt: skip
        env.update(attrs)
        return env

    def task_request(
        self, recipient: str, key: str, data: dict[str, Any], capability: str = "code.review"
    ) -> dict[str, Any]:
        """An unsigned ``agentbus.task.request.v1`` envelope with idempotency key ``key``."""
        env = self.envelope(recipient, data)
        env.update(
            type="agentbus.task.request.v1",
            dataschema=f"{SCHEMA}agentbus.task.request.v1.json",
            subject="tsk_" + env["id"][4:],
            idempotencykey=key,
            capability=capability,
        )
        return env

    def sign(self, env: dict[str, Any]) -> dict[str, Any]:
        unsigned = {k: v for k, v in env.items() if k != "signature"}
        return {**unsigned, "signature": b64url_encode(self.key.sign(canonical_json(unsigned)))}

    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.credential}"}


async def make_world(gw: Gateway, slug: str, workspace: str = "main") -> World:
    operator = Ctx(gw.pool, Actor.operator("cli:test"), keyring=gw.keyring)
    owner = OwnerSpec(f"owner@{slug}.example", "oidc:test", f"{slug}-owner")
    created = await tenants.create_tenant(operator, slug=slug, display_name=slug, owner=owner)
    assert created.owner_user is not None
    assert created.bootstrap_token is not None
    tid = created.tenant["id"]
    as_owner = Ctx(gw.pool, Actor.user(tid, created.owner_user["id"]))
    ws = await workspaces.create_workspace(as_owner, tid, slug=workspace, display_name=workspace)
    return World(tid, slug, ws["id"], workspace, created.bootstrap_token.plaintext)


async def enroll(client: httpx.AsyncClient, world: World, name: str, **extra: Any) -> SimAgent:
    """Register an agent and get its credential, as a sidecar's ``init`` + ``register`` would."""
    agent = SimAgent(f"agent://{world.slug}/{world.workspace}/{name}")
    token = {"Authorization": f"Bearer {world.token}"}
    body = {"workspace": world.workspace, "name": name, "public_key": agent.public_key,
            "proof": agent.proof(agent.address), **extra}  # fmt: skip
    reply = await client.post("/v1/agents", json=body, headers=token)
    assert reply.status_code == 201, reply.text
    agent.agent_id, agent.key_id = reply.json()["agent"]["id"], reply.json()["key"]["id"]
    proof = agent.proof(agent.agent_id, agent.key_id)
    issued = await client.post(
        f"/v1/agents/{agent.agent_id}/credentials", json={"proof": proof}, headers=token
    )
    assert issued.status_code == 200, issued.text
    agent.credential = issued.json()["access_token"]
    return agent


async def post_signed(
    client: httpx.AsyncClient, sender: SimAgent, env: dict[str, Any], route: str = "/v1/messages"
) -> httpx.Response:
    """Sign ``env`` as ``sender`` and post it; the answer, whatever it is."""
    return await client.post(
        route,
        content=canonical_json(sender.sign(env)),
        headers={**sender.headers(), "Content-Type": "application/cloudevents+json"},
    )


async def post_envelope(
    client: httpx.AsyncClient, sender: SimAgent, env: dict[str, Any], route: str = "/v1/messages"
) -> dict[str, Any]:
    """Sign ``env`` as ``sender`` and post it; the 202 answer (receipt, message, task)."""
    reply = await post_signed(client, sender, env, route)
    assert reply.status_code == 202, reply.text
    answer: dict[str, Any] = reply.json()
    return answer


async def send_message(
    client: httpx.AsyncClient, sender: SimAgent, to: SimAgent, data: dict[str, Any]
) -> str:
    """Send one signed message through ``POST /v1/messages``; its id (``msg_...``)."""
    env = sender.envelope(to.address, data)
    await post_envelope(client, sender, env)
    return str(env["id"])
