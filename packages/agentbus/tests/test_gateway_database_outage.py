"""PostgreSQL cut off from the gateway (a TCP gate between them, cut and restored): a send is
refused with AB-9002 as problem+json and stores nothing, and so is a long-poll, which leaves no
copy held until AckWait; the delivery
WebSocket's first pull that meets the outage hands its copy back and says AB-9002, and its later
pulls take nothing from JetStream (the breaker), so the outage costs a waiting message one
delivery attempt; once the database is back the message arrives, and so does the refused send
when sent again."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
from agentbus import broker
from agentbus.gateway.config import GatewaySettings
from agentbus.gateway.context import Gateway
from agentbus.gateway.testing import TcpGate, serving
from agentbus.gateway.testkit import SimAgent, Socket, World, alice_and_bob, post_signed
from agentbus.ids import parse_id
from fastapi import FastAPI

WARM, FIRST, SECOND = {"text": "warm-up"}, {"text": "before the outage"}, {"text": "during it"}


@pytest.fixture
async def gate(agentbus_db: str) -> AsyncIterator[TcpGate]:
    port = urlsplit(agentbus_db).port
    assert port is not None
    opened = TcpGate(port)
    await opened.open()
    yield opened
    await opened.cut()


@pytest.fixture
async def gated(
    tmp_path: Path, agentbus_db: str, nats_url: str, gate: TcpGate
) -> AsyncIterator[tuple[FastAPI, httpx.AsyncClient]]:
    """The gateway app reaching its database through ``gate``."""
    direct = f":{urlsplit(agentbus_db).port}/"
    settings = GatewaySettings(
        database_url=agentbus_db.replace(direct, f":{gate.port}/"),
        nats_url=nats_url,
        config_dir=tmp_path / "config",
        background=False,
    )
    async with serving(settings) as opened:
        yield opened


Acme = tuple[FastAPI, httpx.AsyncClient, Gateway, tuple[World, SimAgent, SimAgent]]


@pytest.fixture
async def acme(gated: tuple[FastAPI, httpx.AsyncClient]) -> Acme:
    """The gated app, its client and gateway, and tenant acme with alice and bob."""
    app, client = gated
    gateway: Gateway = app.state.gateway
    return app, client, gateway, await alice_and_bob(gateway, client)


def refused_for_the_database(reply: httpx.Response) -> bool:
    return (
        reply.status_code == 503
        and reply.headers["Content-Type"] == "application/problem+json"
        and reply.json()["code"] == "AB-9002"
    )


async def frames_for(ws: Socket, seconds: float, deliveries: int = 0) -> list[dict[str, Any]]:
    """What the socket says in the next ``seconds``, or until ``deliveries`` have arrived."""
    frames: list[dict[str, Any]] = []
    until = time.monotonic() + seconds
    while (left := until - time.monotonic()) > 0:
        if deliveries and sum(f["type"] == "delivery" for f in frames) >= deliveries:
            break
        try:
            frames.append(await ws.receive(within_s=left))
        except TimeoutError:
            break
    return frames


async def test_an_outage_refuses_requests_pauses_pulls_and_loses_nothing(
    acme: Acme, gate: TcpGate
) -> None:
    app, client, gateway, (world, alice, bob) = acme
    ws = Socket(app, bob.credential)
    await ws.connect()
    try:
        assert (await ws.receive())["type"] == "hello"
        await ws.send({"type": "credit", "id": "c0", "n": 1})  # one message, to warm up
        assert (
            await post_signed(client, alice, alice.envelope(bob.address, WARM))
        ).status_code == 202
        warm = await ws.receive()
        ack = {"msg_id": warm["msg_id"], "ack_token": warm["ack_token"]}
        await ws.send({"type": "ack", "id": "a0", "acks": [ack]})
        assert (await ws.receive())["results"][0]["result"] == "ok"
        first = alice.envelope(bob.address, FIRST)  # waits: no credit left
        assert (await post_signed(client, alice, first)).status_code == 202
        later = alice.envelope(bob.address, SECOND)

        await gate.cut()
        refused = await post_signed(client, alice, later)
        assert refused_for_the_database(refused), refused.text
        assert str(gate.port) not in refused.text, "no internals in the answer"

        # The socket's pull meets the outage once (AB-9002, its copy handed back with a nak of
        # 10 s); then it pauses, past the nak's delay, without pulling the copy again.
        await ws.send({"type": "credit", "id": "c1", "n": 10})
        during = await frames_for(ws, 12)
        assert [f["type"] for f in during] == ["result"], during
        assert during[0]["problem"]["code"] == "AB-9002"
        consumer = broker.consumer_name(parse_id("agt", bob.agent_id))
        stream = broker.stream_name(world.tenant_id)
        info = await gateway.broker.js.consumer_info(stream, consumer)
        assert info.delivered.consumer_seq == 2, "the warm-up, and one attempt of the first"

        await gate.open()
        assert (await post_signed(client, alice, later)).status_code == 202  # the outbox's retry
        after = [f for f in await frames_for(ws, 15, deliveries=2) if f["type"] == "delivery"]
        got = sorted((f["envelope"]["data"]["text"], f["attempt"]) for f in after)
        assert got == [(FIRST["text"], 2), (SECOND["text"], 1)]
    finally:
        await ws.close()


async def test_a_long_poll_during_the_outage_is_refused_and_holds_no_copy(
    acme: Acme, gate: TcpGate
) -> None:
    _app, client, gateway, (world, alice, bob) = acme
    assert (await post_signed(client, alice, alice.envelope(bob.address, FIRST))).status_code == 202
    await gate.cut()
    polled = await client.get("/v1/inbox", params={"wait_s": 1}, headers=bob.headers())
    assert refused_for_the_database(polled), polled.text
    consumer = broker.consumer_name(parse_id("agt", bob.agent_id))
    info = await gateway.broker.js.consumer_info(broker.stream_name(world.tenant_id), consumer)
    assert (info.num_pending, info.num_ack_pending) == (1, 0), "still waiting, not held"
