"""The reconciler (05-DELIVERY-SEMANTICS §12.1) publishes rows left with a NULL stream_seq:
after a simulated crash between commit and publish, and after one between publish and the
sequence write (JetStream's duplicate window then keeps a single copy). A replay of such a
send publishes too and issues a receipt that carries the sequence."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import httpx
import psycopg
import pytest
from agentbus import broker
from agentbus.broker import Broker
from agentbus.gateway.actions.reconciler import Reconciler
from agentbus.gateway.app import create_app
from agentbus.gateway.config import GatewaySettings
from agentbus.gateway.context import Gateway
from agentbus.gateway.testkit import SimAgent, World
from asgi_lifespan import LifespanManager
from nats.js.api import PubAck
from platformkit.testing.services import free_port
from wirekit import canonical_json


async def stream_messages(gw: Gateway, world: World) -> int:
    info = await gw.broker.js.stream_info(broker.stream_name(world.tenant_id))
    return int(info.state.messages)


def stream_seq(url: str, msg_id: str) -> int | None:
    with psycopg.connect(url) as conn:
        row = conn.execute(
            "SELECT stream_seq FROM messages WHERE id = %s::uuid", (msg_id.removeprefix("msg_"),)
        ).fetchone()
    assert row is not None
    return None if row[0] is None else int(row[0])


def lose_publishes(monkeypatch: pytest.MonkeyPatch, gw: Gateway) -> None:
    """Every publish is lost, as when the process dies before it reaches NATS (until
    ``monkeypatch.undo()``)."""

    async def lost(*_args: object, **_kwargs: object) -> PubAck | None:
        return None

    monkeypatch.setattr(gw.broker, "publish", lost)


async def send(
    client: httpx.AsyncClient, sender: SimAgent, env: dict[str, object]
) -> httpx.Response:
    headers = {**sender.headers(), "Content-Type": "application/cloudevents+json"}
    return await client.post("/v1/messages", content=canonical_json(env), headers=headers)


async def test_reconciler_publishes_after_a_crash_before_publish(
    gateway: Gateway,
    gateway_client: httpx.AsyncClient,
    acme_agents: tuple[World, SimAgent, SimAgent],
    agentbus_db: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    world, alice, bob = acme_agents
    lose_publishes(monkeypatch, gateway)
    env = alice.sign(alice.envelope(bob.address, {"text": "survives the crash"}))
    reply = await send(gateway_client, alice, env)
    assert reply.status_code == 202, reply.text
    assert reply.json()["receipt"]["seq"] is None
    assert stream_seq(agentbus_db, env["id"]) is None
    assert await stream_messages(gateway, world) == 0
    monkeypatch.undo()
    reconciler = Reconciler(gateway, min_age=timedelta(0))
    assert await reconciler.run_once() == 1
    seq = stream_seq(agentbus_db, env["id"])
    assert seq is not None
    assert await stream_messages(gateway, world) == 1
    stored = await gateway.broker.js.get_msg(broker.stream_name(world.tenant_id), seq)
    assert stored.headers is not None
    assert stored.headers["Nats-Msg-Id"] == env["id"]
    assert await reconciler.run_once() == 0  # nothing left to do
    # The sender's retry now gets a new receipt with the sequence.
    again = await send(gateway_client, alice, env)
    assert again.status_code == 200
    assert again.json()["receipt"]["seq"] == seq
    assert again.json()["receipt"]["id"] != reply.json()["receipt"]["id"]
    assert await stream_messages(gateway, world) == 1


async def test_republish_after_a_crash_before_the_sequence_write_is_deduplicated(
    gateway: Gateway,
    gateway_client: httpx.AsyncClient,
    acme_agents: tuple[World, SimAgent, SimAgent],
    agentbus_db: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    world, alice, bob = acme_agents
    acks: list[PubAck] = []
    real = Broker.publish

    async def published_then_lost(
        self: Broker, subject: str, body: bytes, **kwargs: Any
    ) -> PubAck | None:
        ack = await real(self, subject, body, **kwargs)
        assert ack is not None
        acks.append(ack)
        return None  # the PubAck never made it back to the handler

    monkeypatch.setattr(Broker, "publish", published_then_lost)
    env = alice.sign(alice.envelope(bob.address, {"text": "published once"}))
    assert (await send(gateway_client, alice, env)).status_code == 202
    assert stream_seq(agentbus_db, env["id"]) is None
    assert await stream_messages(gateway, world) == 1
    monkeypatch.undo()
    assert await Reconciler(gateway, min_age=timedelta(0)).run_once() == 1
    assert stream_seq(agentbus_db, env["id"]) == acks[0].seq
    assert await stream_messages(gateway, world) == 1


async def test_young_rows_are_left_to_their_sender(
    gateway: Gateway,
    gateway_client: httpx.AsyncClient,
    acme_agents: tuple[World, SimAgent, SimAgent],
    agentbus_db: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _world, alice, bob = acme_agents
    lose_publishes(monkeypatch, gateway)
    env = alice.sign(alice.envelope(bob.address, {"text": "just now"}))
    assert (await send(gateway_client, alice, env)).status_code == 202
    monkeypatch.undo()
    assert await Reconciler(gateway, min_age=timedelta(seconds=10)).run_once() == 0
    assert stream_seq(agentbus_db, env["id"]) is None


async def test_sends_succeed_while_nats_is_away(
    gateway: Gateway,
    gateway_client: httpx.AsyncClient,
    gateway_settings: GatewaySettings,
    acme_agents: tuple[World, SimAgent, SimAgent],
    agentbus_db: str,
) -> None:
    """A second instance that cannot reach NATS still accepts (``seq: null``); the reconciler
    of a healthy instance publishes the row."""
    _world, alice, bob = acme_agents
    away = gateway_settings.model_copy(update={"nats_url": f"nats://127.0.0.1:{free_port()}"})
    app = create_app(away)
    async with (
        LifespanManager(app, startup_timeout=30),
        httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://gateway-2.test"
        ) as client,
    ):
        env = alice.sign(alice.envelope(bob.address, {"text": "while NATS was away"}))
        reply = await send(client, alice, env)
        assert reply.status_code == 202, reply.text
        assert reply.json()["receipt"]["seq"] is None
    assert stream_seq(agentbus_db, env["id"]) is None
    assert await Reconciler(gateway, min_age=timedelta(0)).run_once() == 1
    assert stream_seq(agentbus_db, env["id"]) is not None


async def test_unpublished_rows_of_one_batch_are_republished_in_id_order(
    gateway: Gateway,
    gateway_client: httpx.AsyncClient,
    acme_agents: tuple[World, SimAgent, SimAgent],
    agentbus_db: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A batch's rows share its ``accepted_at``; a sidecar's ids rise with its send order, so
    the reconciler keeps each lane's order by taking equal times in id order."""
    _world, alice, bob = acme_agents
    lose_publishes(monkeypatch, gateway)
    envs = [alice.sign(alice.envelope(bob.address, {"text": f"m{n}"})) for n in range(12)]
    reply = await gateway_client.post(  # newest first: rows are stored against id order
        "/v1/messages/batch",
        content=canonical_json({"envelopes": envs[::-1]}),
        headers={**alice.headers(), "Content-Type": "application/json"},
    )
    assert [r["receipt"]["seq"] for r in reply.json()["results"]] == [None] * len(envs)
    monkeypatch.undo()

    assert await Reconciler(gateway, min_age=timedelta(0)).run_once() == len(envs)
    seqs = [stream_seq(agentbus_db, env["id"]) for env in envs]
    assert seqs == list(range(1, len(envs) + 1))
