"""End to end on a gateway with two granian workers: a client that opens a connection per
request (curl, a script without keep-alive) pulls on one worker and reads on the other, and
every JetStream copy is still acked at once, by the worker that handed it out
(``delivery.handoff``). Before, such a copy waited for AckWait (30 s)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import nats
import pytest
from agentbus.bench.deploy import Agent, enroll
from agentbus.e2e import TENANT, Stack, open_stack
from agentbus_sidecar.envelope import build_envelope, sign_envelope
from wirekit import canonical_json

pytestmark = pytest.mark.timeout(240)

ROUNDS = 12  # each a pull and a read on new connections; granian spreads them over the workers
PER_ROUND = 3


@pytest.fixture
async def two_workers(agentbus_db: str, tmp_path: Path) -> AsyncIterator[tuple[Stack, str]]:
    async with open_stack(agentbus_db, tmp_path, workers=2) as opened:
        yield opened


def _fresh(stack: Stack, agent: Agent) -> httpx.AsyncClient:
    headers = {"Authorization": f"Bearer {agent.credential}", "Connection": "close"}
    return httpx.AsyncClient(base_url=stack.url, timeout=30, headers=headers)


def _envelopes(sender: Agent, receiver: Agent, n: int) -> bytes:
    signed = []
    for i in range(PER_ROUND):
        env = build_envelope(
            type="agentbus.message.v1", source=sender.address, recipient=receiver.address,
            data={"text": f"round {n} message {i}"}, key_id=sender.key_id,
        )  # fmt: skip
        signed.append(canonical_json(sign_envelope(env, sender.key)))
    return b'{"envelopes":[' + b",".join(signed) + b"]}"


async def _unacked(nats_url: str) -> int:
    """Copies handed out and not acked, over the consumers of every tenant stream."""
    nc = await nats.connect(nats_url)
    try:
        js, total = nc.jetstream(), 0
        for stream in await js.streams_info():
            if stream.config.name and stream.config.name.startswith("T_"):
                infos = await js.consumers_info(stream.config.name)
                total += sum(info.num_ack_pending or 0 for info in infos)
        return total
    finally:
        await nc.close()


async def test_reads_on_either_worker_settle_every_copy_at_once(
    two_workers: tuple[Stack, str],
) -> None:
    stack, token = two_workers
    async with httpx.AsyncClient(base_url=stack.url, timeout=30) as client:
        alice = await enroll(client, token, "alice", tenant=TENANT)
        bob = await enroll(client, token, "bob", tenant=TENANT)
    left: list[int] = []
    for n in range(ROUNDS):
        async with _fresh(stack, alice) as c:
            sent = await c.post(
                "/v1/messages/batch",
                content=_envelopes(alice, bob, n),
                headers={"Content-Type": "application/json"},
            )
        assert sent.status_code == 200, sent.text
        got: list[dict[str, Any]] = []
        while len(got) < PER_ROUND:
            async with _fresh(stack, bob) as c:
                got += (await c.get("/v1/inbox?wait_s=2&max=100")).json()["deliveries"]
        async with _fresh(stack, bob) as c:
            reads = {"reads": [{"msg_id": d["msg_id"]} for d in got]}
            read = await c.post("/v1/inbox/read", json=reads)
        assert [r["result"] for r in read.json()["results"]] == ["ok"] * PER_ROUND, read.text
        for _ in range(40):  # acks are published, not awaited
            if (unacked := await _unacked(stack.nats.url)) == 0:
                break
            await asyncio.sleep(0.05)
        left.append(unacked)
    assert left == [0] * ROUNDS, f"copies left to AckWait after each round: {left}"
