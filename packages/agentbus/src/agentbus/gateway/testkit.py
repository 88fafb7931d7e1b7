"""Helpers for gateway tests: a tenant with a workspace and its bootstrap token, and agents
that register, prove their key and sign envelopes the way a sidecar does (conventions §5).
The fixtures that start the app are in ``agentbus.gateway.testing``."""

from __future__ import annotations

import asyncio
import json
import secrets
import time
import uuid
from collections.abc import MutableMapping
from dataclasses import dataclass, field
from typing import Any

import httpx
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from platformkit.db.scope import tenant_transaction
from platformkit.ids import uuid7
from starlette.types import ASGIApp
from wirekit import canonical_json

from agentbus.actions import tenants, tokens, workspaces
from agentbus.actions.context import Actor, Ctx
from agentbus.actions.users import OwnerSpec
from agentbus.db import SCOPE
from agentbus.delivery.dlq import DeadLetterWorker, ensure_advisory_stream
from agentbus.delivery.domain import MAX_DELIVER
from agentbus.gateway.actions.signing import raw_public
from agentbus.gateway.context import Gateway
from agentbus.gateway.domain.wire import b64url_encode, format_ts, uuid7_time
from agentbus.gateway.store.messages import find_message
from agentbus.ids import format_id, parse_id
from agentbus.store.integration_tokens import verify_integration_token

SCHEMA = "https://agentbus.exchange/schemas/"
REVIEW = [{"name": "code.review", "version": "1", "description": "Review a diff"}]
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


async def alice_and_bob(gw: Gateway, client: httpx.AsyncClient) -> tuple[World, SimAgent, SimAgent]:
    """Tenant ``acme`` with alice and bob, bob offering ``code.review``."""
    world = await make_world(gw, "acme")
    alice = await enroll(client, world, "alice")
    bob = await enroll(client, world, "bob", capabilities=REVIEW)
    return world, alice, bob


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


async def owner_token(
    gw: Gateway, world: World, scopes: list[str], workspace_id: uuid.UUID | None = None
) -> dict[str, str]:
    """Headers with another token of the tenant's owner, one with only ``scopes`` (and bound
    to ``workspace_id``, if given)."""
    owner = (await verify_integration_token(gw.pool, world.token)).owner_user_id
    issued = await tokens.create_integration_token(
        Ctx(gw.pool, Actor.user(world.tenant_id, owner)), world.tenant_id,
        owner_user_id=owner, name="narrow", scopes=scopes, workspace_id=workspace_id,
    )  # fmt: skip
    return {"Authorization": f"Bearer {issued.plaintext}"}


async def poll_inbox(
    client: httpx.AsyncClient, agent: SimAgent, wait_s: int = 0, **params: Any
) -> dict[str, Any]:
    """One ``GET /v1/inbox`` of ``agent``; its 200 answer."""
    reply = await client.get(
        "/v1/inbox", params={"wait_s": wait_s, **params}, headers=agent.headers()
    )
    assert reply.status_code == 200, reply.text
    answer: dict[str, Any] = reply.json()
    return answer


async def settle_inbox(
    client: httpx.AsyncClient, agent: SimAgent, verb: str, items: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """``POST /v1/inbox/{verb}`` (ack, nak, term, read) with ``items``; the results."""
    key = {"ack": "acks", "nak": "naks", "term": "terms", "read": "reads"}[verb]
    reply = await client.post(f"/v1/inbox/{verb}", json={key: items}, headers=agent.headers())
    assert reply.status_code == 200, reply.text
    return list(reply.json()["results"])


async def nak_until_dead_lettered(
    gw: Gateway, client: httpx.AsyncClient, world: World, recipient: SimAgent, msg_id: str
) -> int:
    """The recipient naks the message (waiting for it) MaxDeliver times; JetStream gives up
    and advises so, and the dlq-worker dead-letters it. How many advisories it handled."""
    await ensure_advisory_stream(gw.broker)
    for attempt in range(1, MAX_DELIVER + 1):
        [delivery] = (await poll_inbox(client, recipient, wait_s=5))["deliveries"]
        assert (delivery["msg_id"], delivery["attempt"]) == (msg_id, attempt)
        nak = {"msg_id": msg_id, "ack_token": delivery["ack_token"], "delay_ms": 0}
        await settle_inbox(client, recipient, "nak", [nak])
    assert (await poll_inbox(client, recipient, wait_s=1))["deliveries"] == []  # it gave up
    worker, handled = DeadLetterWorker(gw.pool, gw.broker, wait_s=2.0), 0
    for _ in range(5):
        handled += await worker.run_once()
        async with tenant_transaction(gw.pool, SCOPE, world.tenant_id) as conn:
            row = await find_message(conn, world.tenant_id, parse_id("msg", msg_id))
        if row is not None and row["status"] == "dead_lettered":
            break
    return handled


Json = dict[str, Any]


class Closed(Exception):
    """The server closed the ``Socket`` with ``code``."""

    def __init__(self, code: int) -> None:
        super().__init__(code)
        self.code = code


class Socket:
    """A WebSocket client speaking ASGI to the app directly."""

    def __init__(
        self, app: ASGIApp, token: str, subprotocols: tuple[str, ...] = ("agentbus.v1",)
    ) -> None:
        self.app, self.token, self.subprotocols = app, token, subprotocols
        self.accepted: str | None = None  # the subprotocol the server chose
        self.to_app: asyncio.Queue[Json] = asyncio.Queue()
        self.from_app: asyncio.Queue[Json] = asyncio.Queue()
        self.task: asyncio.Task[None] | None = None

    async def connect(self) -> None:
        scope = {
            "type": "websocket", "asgi": {"version": "3.0"}, "scheme": "ws",
            "path": "/v1/inbox/ws", "raw_path": b"/v1/inbox/ws", "query_string": b"",
            "root_path": "", "client": ("127.0.0.1", 40000), "server": ("gateway.test", 80),
            "headers": [(b"authorization", f"Bearer {self.token}".encode())],
            "subprotocols": list(self.subprotocols),
        }  # fmt: skip

        async def to_test(message: MutableMapping[str, Any]) -> None:
            await self.from_app.put(dict(message))

        async def run() -> None:
            await self.app(scope, self.to_app.get, to_test)

        self.task = asyncio.create_task(run())
        await self.to_app.put({"type": "websocket.connect"})
        accepted = await self._next()
        assert accepted["type"] == "websocket.accept", accepted
        self.accepted = accepted.get("subprotocol")

    async def _next(self, within_s: float = 10.0) -> Json:
        return await asyncio.wait_for(self.from_app.get(), within_s)

    async def send(self, frame: Json) -> None:
        await self.send_text(json.dumps(frame))

    async def send_text(self, text: str) -> None:
        """A text frame as it is, JSON or not."""
        await self.to_app.put({"type": "websocket.receive", "text": text})

    async def receive(self, within_s: float = 10.0) -> Json:
        while True:
            event = await self._next(within_s)
            if event["type"] == "websocket.close":
                raise Closed(event.get("code", 1000))
            frame: Json = json.loads(event["text"])
            if frame.get("type") != "ping":
                return frame

    async def result_for(self, frame_id: str, within_s: float = 30.0) -> Json:
        """The ``result`` frame answering the frame ``frame_id``, skipping the frames before
        it."""
        while True:
            frame = await self.receive(within_s)
            if frame.get("type") == "result" and frame.get("for") == frame_id:
                return frame

    async def until_closed(self) -> int:
        """Skip frames until the server closes; the close code."""
        try:
            while True:
                await self.receive()
        except Closed as closed:
            return closed.code

    async def close(self) -> None:
        await self.to_app.put({"type": "websocket.disconnect", "code": 1000})
        if self.task is not None:
            await asyncio.wait_for(asyncio.gather(self.task, return_exceptions=True), 10)
