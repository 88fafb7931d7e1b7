"""POST /v1/messages/batch on the real app, PostgreSQL and NATS: every envelope is answered on
its own and in order, accepted ones exactly as a single send would be (row, payload, one
JetStream copy, a signed receipt with the sequence), refused ones store nothing, a refused
envelope holds back the rest of its lane and no other, and a batch's lane reaches the stream
in order."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest
from agentbus import broker
from agentbus.db import SCOPE
from agentbus.gateway.actions.receipts import ReceiptWrites, verify_receipt
from agentbus.gateway.context import Gateway
from agentbus.gateway.store import messages
from agentbus.gateway.store.receipts import insert_receipts
from agentbus.gateway.testkit import SimAgent, World, enroll, make_world
from agentbus.ids import format_id, parse_id
from agentbus.tasks.errors import TaskNotFound
from platformkit.db.scope import tenant_transaction
from platformkit.ids import uuid7
from wirekit import canonical_json


async def post_batch(
    client: httpx.AsyncClient, agent: SimAgent, envelopes: list[Any]
) -> httpx.Response:
    return await client.post(
        "/v1/messages/batch",
        content=json.dumps({"envelopes": envelopes}).encode(),
        headers={**agent.headers(), "Content-Type": "application/json"},
    )


async def stored_seqs(gw: Gateway, world: World, ids: list[str]) -> list[int | None]:
    async with tenant_transaction(gw.pool, SCOPE, world.tenant_id) as conn:
        rows = [await messages.find_message(conn, world.tenant_id, parse_id("msg", i)) for i in ids]
    return [None if r is None else r["stream_seq"] for r in rows]


Pair = tuple[World, SimAgent, SimAgent]
REVIEW = [{"name": "code.review", "version": "1", "description": "Review a diff"}]


@pytest.fixture
async def acme(gateway: Gateway, gateway_client: httpx.AsyncClient) -> Pair:
    """Tenant acme with agents alice and bob."""
    world = await make_world(gateway, "acme")
    alice = await enroll(gateway_client, world, "alice")
    return world, alice, await enroll(gateway_client, world, "bob")


async def test_a_batch_answers_each_envelope_in_order(
    gateway: Gateway, gateway_client: httpx.AsyncClient, acme: Pair
) -> None:
    world, alice, bob = acme
    carol = await enroll(gateway_client, world, "carol")
    lane = format_id("cnv", uuid7())
    to_bob = [
        alice.sign(alice.envelope(bob.address, {"text": f"m{n}"}, conversation=lane))
        for n in range(5)
    ]
    tampered = dict(to_bob[2], data={"text": "changed after signing"})
    to_carol = alice.sign(alice.envelope(carol.address, {"text": "other lane"}))
    batch = [to_bob[0], to_bob[1], tampered, to_carol, to_bob[3], "not an envelope", to_bob[4]]

    reply = await post_batch(gateway_client, alice, batch)

    assert reply.status_code == 200, reply.text
    results = reply.json()["results"]
    assert [r["status"] for r in results] == [202, 202, 422, 202, 409, 400, 409]
    assert results[2]["problem"]["code"] == "AB-2011"  # the signature no longer verifies
    assert results[4]["problem"]["code"] == "AB-2021"  # held: its lane's earlier one failed
    assert results[5]["problem"]["code"] == "AB-2001"  # a lane of its own
    assert results[6]["problem"]["code"] == "AB-2021"
    assert results[2]["problem"]["instance"] == "/v1/messages/batch"
    # The accepted ones: receipts that verify, rows with the receipt's sequence, in lane order.
    accepted = [results[0], results[1], results[3]]
    for result, env in zip(accepted, [to_bob[0], to_bob[1], to_carol], strict=True):
        assert result["message"]["id"] == env["id"]
        assert result["receipt"]["msg_id"] == env["id"]
        assert verify_receipt(gateway.signing, result["receipt"])
    seqs = await stored_seqs(gateway, world, [to_bob[0]["id"], to_bob[1]["id"], to_carol["id"]])
    assert seqs == [r["receipt"]["seq"] for r in accepted]
    assert seqs[0] is not None
    assert seqs[1] is not None
    assert seqs[0] < seqs[1]
    # Nothing of the refused or held ones was stored or published.
    assert await stored_seqs(gateway, world, [to_bob[n]["id"] for n in (2, 3, 4)]) == [None] * 3
    info = await gateway.broker.js.stream_info(broker.stream_name(world.tenant_id))
    assert info.state.messages == 3
    # The held envelopes go through when sent again; the conversation counts every message.
    again = await post_batch(gateway_client, alice, [to_bob[3], to_bob[4]])
    assert [r["status"] for r in again.json()["results"]] == [202, 202]
    cnv = await gateway_client.get(f"/v1/conversations/{lane}", headers=bob.headers())
    assert cnv.json()["message_count"] == 4
    assert sorted(cnv.json()["participants"]) == [alice.address, bob.address]


async def test_a_batch_replays_what_was_accepted_before(
    gateway: Gateway, gateway_client: httpx.AsyncClient, acme: Pair
) -> None:
    world, alice, bob = acme
    first = alice.sign(alice.envelope(bob.address, {"text": "one"}))
    second = alice.sign(alice.envelope(bob.address, {"text": "two"}))
    single = await gateway_client.post(
        "/v1/messages",
        content=canonical_json(first),
        headers={**alice.headers(), "Content-Type": "application/cloudevents+json"},
    )
    assert single.status_code == 202, single.text

    # The same envelope twice in one batch, after a single send of another: two replays.
    reply = await post_batch(gateway_client, alice, [first, second, second])

    results = reply.json()["results"]
    assert [r["status"] for r in results] == [200, 202, 200]
    assert results[0]["replayed"] is True
    assert "replayed" not in results[1]
    assert results[0]["receipt"] == single.json()["receipt"]
    assert results[2]["message"]["id"] == second["id"]
    assert results[2]["receipt"]["seq"] == results[1]["receipt"]["seq"]
    info = await gateway.broker.js.stream_info(broker.stream_name(world.tenant_id))
    assert info.state.messages == 2


async def test_a_batch_is_refused_whole_when_its_shape_is_wrong(
    gateway: Gateway, gateway_client: httpx.AsyncClient, acme: Pair
) -> None:
    _world, alice, bob = acme
    env = alice.sign(alice.envelope(bob.address, {"text": "hi"}))
    too_many = await post_batch(gateway_client, alice, [env] * 101)
    assert (too_many.status_code, too_many.json()["code"]) == (413, "AB-5009")
    empty = await post_batch(gateway_client, alice, [])
    assert (empty.status_code, empty.json()["code"]) == (400, "AB-2001")
    duplicate = await gateway_client.post(
        "/v1/messages/batch",
        content=b'{"envelopes": [{"id": "a", "id": "b"}]}',
        headers={**alice.headers(), "Content-Type": "application/json"},
    )
    assert (duplicate.status_code, duplicate.json()["code"]) == (400, "AB-2001")
    wrong_type = await gateway_client.post(
        "/v1/messages/batch",
        content=json.dumps({"envelopes": [env]}).encode(),
        headers={**alice.headers(), "Content-Type": "text/plain"},
    )
    assert (wrong_type.status_code, wrong_type.json()["code"]) == (415, "AB-2017")
    oversize = alice.sign(alice.envelope(bob.address, {"text": "x" * 330_000}))
    reply = await post_batch(gateway_client, alice, [oversize, env])
    assert [r["status"] for r in reply.json()["results"]] == [413, 202]
    assert reply.json()["results"][0]["problem"]["code"] == "AB-5002"
    anonymous = await gateway_client.post(
        "/v1/messages/batch",
        content=json.dumps({"envelopes": [env]}).encode(),
        headers={"Content-Type": "application/json"},
    )
    assert anonymous.status_code == 401


async def test_a_batch_cannot_address_another_tenant(
    gateway: Gateway, gateway_client: httpx.AsyncClient
) -> None:
    acme, globex = await make_world(gateway, "acme"), await make_world(gateway, "globex")
    alice = await enroll(gateway_client, acme, "alice")
    bob = await enroll(gateway_client, acme, "bob")
    mallory = await enroll(gateway_client, globex, "mallory")
    inside = alice.sign(alice.envelope(bob.address, {"text": "fine"}))
    outside = alice.sign(alice.envelope(mallory.address, {"text": "nope"}))
    posing = alice.sign(dict(alice.envelope(bob.address, {"text": "as mallory"}),
                             source=mallory.address))  # fmt: skip

    reply = await post_batch(gateway_client, alice, [outside, posing, inside])

    results = reply.json()["results"]
    assert [r["status"] for r in results] == [403, 403, 202]
    assert [r["problem"]["code"] for r in results[:2]] == ["AB-7001", "AB-2013"]
    info = await gateway.broker.js.stream_info(broker.stream_name(globex.tenant_id))
    assert info.state.messages == 0


async def test_a_refusal_after_the_signature_check_holds_the_rest_of_its_lane(
    gateway: Gateway, gateway_client: httpx.AsyncClient, acme: Pair
) -> None:
    world, alice, bob = acme
    lane = {"conversation": format_id("cnv", uuid7())}
    before = alice.sign(alice.envelope(bob.address, {"text": "fine"}, **lane))
    off_schema = alice.sign(alice.envelope(bob.address, {"txet": "typo"}, **lane))
    after = alice.sign(alice.envelope(bob.address, {"text": "held"}, **lane))
    nowhere = alice.sign(alice.envelope("agent://acme/main/nobody", {"text": "lost"}))

    reply = await post_batch(gateway_client, alice, [before, off_schema, nowhere, after])

    results = reply.json()["results"]
    assert [r["status"] for r in results] == [202, 422, 404, 409]
    codes = [r["problem"]["code"] for r in results[1:]]
    assert codes == ["AB-2007", "AB-3002", "AB-2021"]
    assert await stored_seqs(gateway, world, [after["id"], nowhere["id"]]) == [None, None]


class WritesThenRefuses:
    """The gateway's task rules, except that applying the request with idempotency key
    ``refused`` first writes (the sender's description) and then refuses it."""

    def __init__(self, rules: Any) -> None:
        self.rules = rules

    async def check(self, conn: Any, send: Any) -> Any:
        return await self.rules.check(conn, send)

    async def apply(self, conn: Any, send: Any) -> Any:
        if send.envelope.get("idempotencykey") != "refused":
            return await self.rules.apply(conn, send)
        await conn.execute(
            "UPDATE agents SET description = 'written before the refusal' WHERE id = %s",
            (send.principal.agent_id,),
        )
        raise TaskNotFound("refused after writing")

    async def describe(self, conn: Any, message: Any) -> Any:
        return await self.rules.describe(conn, message)


async def test_a_task_refused_after_its_rules_wrote_undoes_only_itself(
    gateway: Gateway, gateway_client: httpx.AsyncClient, acme: Pair, monkeypatch: Any
) -> None:
    """A task envelope's rules run inside a savepoint of the batch's pipelined transaction:
    what they wrote before refusing is undone, and the envelopes around it are stored."""
    world, alice, bob = acme
    carol = await enroll(gateway_client, world, "carol", capabilities=REVIEW)
    monkeypatch.setattr(gateway, "task_rules", WritesThenRefuses(gateway.task_rules))

    def task_request(key: str) -> dict[str, Any]:
        return alice.sign(alice.task_request(carol.address, key, {"instructions": "review"}))

    message = alice.sign(alice.envelope(bob.address, {"text": "around the refusal"}))
    reply = await post_batch(
        gateway_client, alice, [task_request("refused"), message, task_request("kept")]
    )

    assert [r["status"] for r in reply.json()["results"]] == [404, 202, 202], reply.text
    async with tenant_transaction(gateway.pool, SCOPE, world.tenant_id) as conn:
        cur = await conn.execute(
            "SELECT description FROM agents WHERE id = %s", (parse_id("agt", alice.agent_id),)
        )
        row = await cur.fetchone()
    assert row is not None
    assert row["description"] != "written before the refusal"
    assert (await stored_seqs(gateway, world, [message["id"]]))[0] is not None


async def test_tasks_in_a_batch_keep_the_messages_around_them(
    gateway: Gateway, gateway_client: httpx.AsyncClient, acme: Pair
) -> None:
    """Messages are inserted together, a task at once (its rules read and refer to rows); a
    refused task undoes only itself."""
    world, alice, bob = acme
    carol = await enroll(gateway_client, world, "carol", capabilities=REVIEW)
    lane = format_id("cnv", uuid7())

    def task_request(to: SimAgent, key: str) -> dict[str, Any]:
        return alice.sign(alice.task_request(to.address, key, {"instructions": "review PR 4411"}))

    m1, m2 = (alice.sign(alice.envelope(bob.address, {"text": t}, conversation=lane)) for t in "ab")
    m3 = alice.sign(alice.envelope(bob.address, {"text": "another lane"}))
    to_carol, to_bob = task_request(carol, "k1"), task_request(bob, "k2")  # bob offers nothing
    repeat = task_request(carol, "k1")  # same key and payload: the same task (04 §6.1)

    reply = await post_batch(gateway_client, alice, [m1, to_carol, m2, to_bob, m3, repeat])

    results = reply.json()["results"]
    assert [r["status"] for r in results] == [202, 202, 202, 422, 202, 200], results
    assert results[1]["task"]["id"] == to_carol["subject"]
    assert results[5]["duplicate_of"] == to_carol["id"]
    seqs = await stored_seqs(gateway, world, [e["id"] for e in (m1, to_carol, m2, to_bob, m3)])
    assert [s is not None for s in seqs] == [True, True, True, False, True]
    task = await gateway_client.get(f"/v1/tasks/{to_carol['subject']}", headers=carol.headers())
    assert task.status_code == 200, task.text
    missing = await gateway_client.get(f"/v1/tasks/{to_bob['subject']}", headers=alice.headers())
    assert missing.status_code == 404


async def test_receipts_of_several_sends_are_recorded_together_each_with_its_token(
    gateway: Gateway, gateway_client: httpx.AsyncClient
) -> None:
    """Sends that finish at the same moment share one ``record_receipts`` call, and each
    receipt row names the token behind its own send's credential."""
    world = await make_world(gateway, "acme")
    agents = [await enroll(gateway_client, world, f"agent-{n}") for n in range(6)]
    writes = gateway.receipts = ReceiptWrites(gateway.pool)
    replies = await asyncio.gather(
        *(
            post_batch(
                gateway_client, a, [a.sign(a.envelope(agents[(n + 1) % 6].address, {"text": "hi"}))]
            )
            for n, a in enumerate(agents)
        )
    )
    assert [r.status_code for r in replies] == [200] * 6, [r.text for r in replies]
    assert writes.gathered.rounds < len(agents)
    assert [r.json()["results"][0]["status"] for r in replies] == [202] * 6, replies[0].text
    ids = [parse_id("msg", r.json()["results"][0]["message"]["id"]) for r in replies]
    rows = [
        {"id": uuid7(), "msg_id": ids[0], "stream_seq": None, "issued_at": datetime.now(UTC),
         "signature": b"s", "issued_to_token": token, "message_accepted_at": None}
        for token in (uuid7(), uuid7())
    ]  # fmt: skip
    async with gateway.pool.connection() as conn:
        await insert_receipts(conn, world.tenant_id, rows)
    async with tenant_transaction(gateway.pool, SCOPE, world.tenant_id) as conn:
        cur = await conn.execute(
            "SELECT msg_id, stream_seq, issued_to_token FROM receipts WHERE msg_id = ANY(%s)",
            (ids,),
        )
        found = await cur.fetchall()
    sent = [r for r in found if r["stream_seq"] is not None]
    assert sorted(r["msg_id"] for r in sent) == sorted(ids)
    assert {r["issued_to_token"] for r in found if r["stream_seq"] is None} == {
        row["issued_to_token"] for row in rows
    }
