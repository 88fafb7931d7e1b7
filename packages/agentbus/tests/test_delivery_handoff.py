"""A read that reaches a gateway process other than the one that handed the copy out (a second
granian worker, a client without keep-alive): the JetStream copy is acked by the process that
holds its ack subject, not left to AckWait. Two gateway apps in one test process, on the same
database and NATS, each with its own delivery service and NATS connection, as two workers."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator

import httpx
import pytest
from agentbus.delivery import handoff
from agentbus.delivery.service import DeliveryService, nats_client
from agentbus.gateway.app import create_app
from agentbus.gateway.config import GatewaySettings
from agentbus.gateway.context import Gateway
from agentbus.gateway.testkit import SimAgent, World, alice_and_bob, post_envelope
from agentbus.gateway.testkit import poll_inbox as poll
from agentbus.gateway.testkit import settle_inbox as settle
from agentbus.ids import parse_id
from asgi_lifespan import LifespanManager
from fastapi import FastAPI
from hypothesis import given
from hypothesis import strategies as st

uuids = st.uuids()


@given(uuids, uuids, st.lists(uuids, max_size=20))
def test_a_question_decodes_to_what_was_asked(
    tenant: uuid.UUID, agent: uuid.UUID, ids: list[uuid.UUID]
) -> None:
    subject = handoff.handed_subject(tenant, agent)
    assert handoff.decode(subject, handoff.encode(ids)) == (tenant, agent, ids)


@pytest.mark.parametrize(
    ("subject", "data"),
    [
        ("agentbus.delivery.handed.nothex.00", b""),
        (f"agentbus.delivery.other.{'0' * 32}.{'0' * 32}", b""),
        (f"agentbus.delivery.handed.{'0' * 32}.{'0' * 32}", b"not-an-id"),
    ],
)
def test_a_malformed_question_is_refused(subject: str, data: bytes) -> None:
    assert handoff.decode(subject, data) is None


@pytest.fixture
async def other_worker(gateway_settings: GatewaySettings) -> AsyncIterator[FastAPI]:
    app = create_app(gateway_settings)
    async with LifespanManager(app, startup_timeout=30, shutdown_timeout=30):
        yield app


async def _ack_pending(gateway: Gateway, world: World, agent: SimAgent) -> int:
    js = nats_client(gateway.broker).jetstream()
    stream = f"T_{world.tenant_id.hex}"
    info = await js.consumer_info(stream, f"agt_{parse_id('agt', agent.agent_id).hex}")
    return int(info.num_ack_pending)


async def _until_settled(gateway: Gateway, world: World, agent: SimAgent) -> int:
    for _ in range(40):  # acks are published, not awaited: give JetStream a moment
        if (pending := await _ack_pending(gateway, world, agent)) == 0:
            return 0
        await asyncio.sleep(0.05)
    return pending


async def test_a_read_on_another_process_settles_the_copy_where_it_was_handed_out(
    gateway: Gateway, gateway_client: httpx.AsyncClient, other_worker: FastAPI
) -> None:
    world, alice, bob = await alice_and_bob(gateway, gateway_client)
    transport = httpx.ASGITransport(app=other_worker)
    async with httpx.AsyncClient(transport=transport, base_url="http://other.test") as other:
        for round_ in range(2):  # each process reads what the other handed out
            puller, reader = (gateway_client, other) if round_ == 0 else (other, gateway_client)
            envs = [alice.envelope(bob.address, {"text": f"r{round_} n{i}"}) for i in range(3)]
            for env in envs:
                await post_envelope(gateway_client, alice, env)
            got = await poll(puller, bob, wait_s=5)
            assert [d["msg_id"] for d in got["deliveries"]] == [e["id"] for e in envs]
            assert await _ack_pending(gateway, world, bob) == 3
            results = await settle(reader, bob, "read", [{"msg_id": e["id"]} for e in envs])
            assert [r["result"] for r in results] == ["ok", "ok", "ok"]
            # acked by the handing process within 2 s, not left to AckWait (30 s)
            assert await _until_settled(gateway, world, bob) == 0
            assert (await poll(reader, bob))["deliveries"] == []


async def test_a_question_for_copies_not_handed_out_here_acks_nothing(
    gateway_app: FastAPI,
) -> None:
    svc: DeliveryService = gateway_app.state.delivery
    tenant, agent = uuid.uuid4(), uuid.uuid4()
    asked = handoff.encode([uuid.uuid4()])
    assert await handoff.answer(svc, handoff.handed_subject(tenant, agent), asked) == 0
    assert await handoff.answer(svc, "agentbus.delivery.handed.x.y", asked) == 0
