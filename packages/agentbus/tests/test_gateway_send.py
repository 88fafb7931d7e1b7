"""POST /v1/messages on the real app, PostgreSQL and NATS: the accepted path stores the row and
an encrypted payload, publishes exactly one JetStream copy with ``Nats-Msg-Id`` = the message
id, and answers a receipt whose signature verifies against the JWKS; a repeat of the same bytes
replays it; refused envelopes leave no row, no object and no stream message."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import jwt
import psycopg
from agentbus import broker
from agentbus.db import SCOPE
from agentbus.gateway.actions.payloads import load_payload
from agentbus.gateway.actions.receipts import verify_receipt
from agentbus.gateway.context import Gateway
from agentbus.gateway.domain.wire import b64url_decode, format_ts
from agentbus.gateway.store import messages
from agentbus.gateway.testkit import SimAgent, World, enroll, make_world
from agentbus.ids import format_id, parse_id
from platformkit.db.scope import tenant_transaction
from platformkit.ids import uuid7
from wirekit import canonical_json

CE = {"Content-Type": "application/cloudevents+json"}


async def post(client: httpx.AsyncClient, agent: SimAgent, env: Any, **kw: Any) -> httpx.Response:
    body = env if isinstance(env, bytes) else canonical_json(env)
    headers = {**agent.headers(), **CE, **kw.pop("headers", {})}
    return await client.post("/v1/messages", content=body, headers=headers, **kw)


async def stream_messages(gw: Gateway, world: World) -> int:
    info = await gw.broker.js.stream_info(broker.stream_name(world.tenant_id))
    return int(info.state.messages)


def count_rows(url: str, table: str) -> int:
    with psycopg.connect(url) as conn:
        row = conn.execute(f"SELECT count(*) FROM {table}").fetchone()
    assert row is not None
    return int(row[0])


def stored_objects(gw: Gateway) -> list[str]:
    root = gw.settings.objects_dir
    return sorted(str(p.relative_to(root)) for p in root.rglob("*.bin"))


async def test_send_stores_encrypts_publishes_and_signs(
    gateway: Gateway, gateway_client: httpx.AsyncClient, agentbus_db: str
) -> None:
    world = await make_world(gateway, "acme")
    alice = await enroll(gateway_client, world, "alice")
    bob = await enroll(gateway_client, world, "bob")
    data = {"text": "the secret plan is ready", "title": "Plan"}
    env = alice.sign(alice.envelope(bob.address, data))
    reply = await post(gateway_client, alice, env)
    assert reply.status_code == 202, reply.text
    body = reply.json()
    receipt = body["receipt"]
    assert body["message"]["id"] == env["id"]
    assert body["message"]["status"] == "accepted"
    assert receipt["type"] == "agentbus.receipt.v1"
    assert receipt["msg_id"] == env["id"]
    assert isinstance(receipt["seq"], int)
    # The receipt's signature verifies with the JWKS key named by kid, over the four members.
    jwks = (await gateway_client.get("/.well-known/jwks.json")).json()["keys"]
    public = jwt.PyJWK(next(k for k in jwks if k["kid"] == receipt["kid"])).key
    signed = {k: receipt[k] for k in ("id", "msg_id", "seq", "issued_at")}
    public.verify(b64url_decode(receipt["signature"]), canonical_json(signed))
    assert verify_receipt(gateway.signing, receipt)
    # The row: accepted, with the sequence of the receipt and the sender's signature.
    msg_id = parse_id("msg", env["id"])
    async with tenant_transaction(gateway.pool, SCOPE, world.tenant_id) as conn:
        row = await messages.find_message(conn, world.tenant_id, msg_id)
    assert row is not None
    assert (row["status"], row["stream_seq"]) == ("accepted", receipt["seq"])
    assert row["sig"] == b64url_decode(env["signature"])
    assert row["to_address"] == bob.address
    assert row["payload_bytes"] == len(canonical_json(data))
    # The payload object is ciphertext; it decrypts back to data under the tenant key.
    assert stored_objects(gateway) == [row["payload_ref"]]
    assert row["payload_ref"].endswith(f"/{env['id']}.bin")
    assert row["payload_ref"].startswith(f"tenants/ten_{world.tenant_id.hex}/payloads/")
    sealed = (gateway.settings.objects_dir / row["payload_ref"]).read_bytes()
    assert b"secret plan" not in sealed
    assert sealed != canonical_json(data)
    assert await load_payload(gateway, row) == data
    # Exactly one JetStream copy, on bob's inbox subject, carrying the message id.
    assert await stream_messages(gateway, world) == 1
    stored = await gateway.broker.js.get_msg(broker.stream_name(world.tenant_id), receipt["seq"])
    assert stored.headers is not None
    assert stored.headers["Nats-Msg-Id"] == env["id"]
    assert stored.subject == row["to_subject"]
    copy = json.loads(stored.data or b"{}")
    assert copy["data"] == {"$ref": row["payload_ref"]}
    assert {k: v for k, v in copy.items() if k != "data"} == {
        k: v for k, v in env.items() if k != "data"
    }
    # The conversation exists with both parties, counted by the trigger.
    cnv = await gateway_client.get(
        f"/v1/conversations/{env['conversation']}", headers=bob.headers()
    )
    assert cnv.status_code == 200, cnv.text
    assert sorted(cnv.json()["participants"]) == [alice.address, bob.address]
    assert (cnv.json()["message_count"], cnv.json()["title"]) == (1, "Plan")
    # The recipient reads the reconstructed envelope; it is exactly what alice signed.
    read = await gateway_client.get(
        f"/v1/messages/{env['id']}", params={"include": "envelope"}, headers=bob.headers()
    )
    assert read.status_code == 200, read.text
    assert read.json()["envelope"] == env
    # The same bytes again: a replay with the same receipt, nothing new stored or published.
    again = await post(gateway_client, alice, env)
    assert again.status_code == 200
    assert again.headers["Idempotent-Replayed"] == "true"
    assert again.json()["receipt"] == receipt
    assert await stream_messages(gateway, world) == 1
    assert count_rows(agentbus_db, "messages") == 1


async def test_refused_envelopes_store_and_publish_nothing(
    gateway: Gateway, gateway_client: httpx.AsyncClient, agentbus_db: str
) -> None:
    world = await make_world(gateway, "acme")
    alice = await enroll(gateway_client, world, "alice")
    bob = await enroll(gateway_client, world, "bob")
    to_bob = alice.envelope(bob.address, {"text": "hi"})
    now = datetime.now(UTC)

    def with_id(moment: datetime) -> dict[str, Any]:
        value = uuid7()
        ms = int(moment.timestamp() * 1000)
        forged = type(value)(int=(ms << 80) | (value.int & ((1 << 80) - 1)))
        return {"id": format_id("msg", forged), "time": format_ts(moment)}

    oversize = {"text": "x" * 60000, "metadata": {f"k{i}": "y" * 3000 for i in range(80)}}
    tampered = alice.sign(to_bob)
    tampered["data"] = {"text": "bye"}
    cases: list[tuple[str, Any, dict[str, str]]] = [
        ("AB-2006", alice.sign({**to_bob, "type": "agentbus.poke.v1"}), {}),
        ("AB-2006", alice.sign({**to_bob, "dataschema": "https://example.com/x.json"}), {}),
        ("AB-2007", alice.sign({**to_bob, "data": {"txt": "no text member"}}), {}),
        ("AB-2011", tampered, {}),
        ("AB-5001", alice.sign({**to_bob, "data": oversize}), {}),
        ("AB-2014", alice.sign({**to_bob, "expires": format_ts(now - timedelta(seconds=5))}), {}),
        ("AB-2015", alice.sign({**to_bob, "expires": format_ts(now + timedelta(days=30))}), {}),
        ("AB-2018", alice.sign({**to_bob, "data": {"text": "n", "metadata": {"n": 2**60}}}), {}),
        ("AB-2009", alice.sign({**to_bob, **with_id(now + timedelta(minutes=10))}), {}),
        ("AB-2010", alice.sign({**to_bob, **with_id(now - timedelta(days=7))}), {}),
        ("AB-2003", alice.sign({**to_bob, "time": "2020-01-01T00:00:00.000Z"}), {}),
        ("AB-2004", alice.sign({**to_bob, "tracestate": "x=1"}), {}),
        ("AB-2002", alice.sign({k: v for k, v in to_bob.items() if k != "priority"}), {}),
        ("AB-2005", alice.sign({**to_bob, "specversion": "0.3"}), {}),
        ("AB-2008", alice.sign({**to_bob, "id": "msg_" + "0" * 32}), {}),
        ("AB-2013", alice.sign({**to_bob, "source": bob.address}), {}),
        ("AB-2012", alice.sign({**to_bob, "keyid": bob.key_id}), {}),
        ("AB-2017", alice.sign(to_bob), {"Content-Type": "text/plain"}),
        ("AB-2001", b'{"id": "a", "id": "b"}', {}),
        ("AB-5002", b"{" + b" " * 330000 + b"}", {}),
        ("AB-3001", alice.sign({**to_bob, "recipient": "agent://acme/main/Bob"}), {}),
        ("AB-3002", alice.sign({**to_bob, "recipient": "agent://acme/main/nobody"}), {}),
        ("AB-3004", alice.sign({**to_bob, "recipient": "topic://acme/main/news"}), {}),
        ("AB-3008", alice.sign({**to_bob, "replyto": "agent://other/main/bob"}), {}),
    ]
    for code, env, headers in cases:
        reply = await post(gateway_client, alice, env, headers=headers)
        assert reply.headers["content-type"] == "application/problem+json", (code, reply.text)
        assert reply.json()["code"] == code, (code, reply.text)
    assert count_rows(agentbus_db, "messages") == 0
    assert count_rows(agentbus_db, "receipts") == 0
    assert count_rows(agentbus_db, "conversations") == 0
    assert stored_objects(gateway) == []
    assert await stream_messages(gateway, world) == 0
    # A replayed id with other content is AB-2016 and leaves the first message alone.
    first = alice.sign(to_bob)
    assert (await post(gateway_client, alice, first)).status_code == 202
    other = alice.sign({**to_bob, "data": {"text": "something else"}})
    reply = await post(gateway_client, alice, other)
    assert (reply.status_code, reply.json()["code"]) == (409, "AB-2016")
    assert count_rows(agentbus_db, "messages") == 1
    assert len(stored_objects(gateway)) == 1
    assert await stream_messages(gateway, world) == 1


async def test_cross_tenant_address_is_refused(
    gateway: Gateway, gateway_client: httpx.AsyncClient, agentbus_db: str
) -> None:
    acme = await make_world(gateway, "acme")
    globex = await make_world(gateway, "globex")
    alice = await enroll(gateway_client, acme, "alice")
    carol = await enroll(gateway_client, globex, "carol")
    env = alice.sign(alice.envelope(carol.address, {"text": "hello from acme"}))
    reply = await post(gateway_client, alice, env)
    assert (reply.status_code, reply.json()["code"]) == (403, "AB-7001")
    # carol's credential cannot read anything of acme either.
    read = await gateway_client.get(f"/v1/messages/{env['id']}", headers=carol.headers())
    assert read.json()["code"] == "AB-8002"
    assert count_rows(agentbus_db, "messages") == 0
    assert count_rows(agentbus_db, "conversations") == 0
    assert stored_objects(gateway) == []


async def test_a_conversation_is_started_joined_and_kept_to_its_parties(
    gateway: Gateway, gateway_client: httpx.AsyncClient, agentbus_db: str
) -> None:
    """The first message under a new id starts the conversation (its sender, workspace and
    title); the parties write in it again; a third agent of the tenant is not a participant
    (AB-3005); the id is another tenant's conflict (AB-2019), which stores nothing there."""
    acme = await make_world(gateway, "acme")
    globex = await make_world(gateway, "globex")
    alice, bob, eve = [await enroll(gateway_client, acme, name) for name in ("alice", "bob", "eve")]
    carol, dave = [await enroll(gateway_client, globex, name) for name in ("carol", "dave")]
    first = alice.envelope(bob.address, {"text": "PR 42?", "title": "Review PR 42"})
    assert (await post(gateway_client, alice, alice.sign(first))).status_code == 202
    conversation = first["conversation"]

    async def send(sender: SimAgent, to: SimAgent, text: str) -> httpx.Response:
        env = sender.envelope(to.address, {"text": text}, conversation=conversation)
        return await post(gateway_client, sender, sender.sign(env))

    assert (await send(bob, alice, "on it")).status_code == 202
    assert (await send(alice, bob, "thanks")).status_code == 202
    outsider = await send(eve, bob, "me too")
    assert (outsider.status_code, outsider.json()["code"]) == (403, "AB-3005"), outsider.text
    elsewhere = await send(carol, dave, "same id, other tenant")
    assert (elsewhere.status_code, elsewhere.json()["code"]) == (409, "AB-2019"), elsewhere.text

    async with tenant_transaction(gateway.pool, SCOPE, acme.tenant_id) as conn:
        cur = await conn.execute(
            "SELECT started_by, workspace_id, title, participants, message_count"
            " FROM conversations WHERE id = %s",
            (parse_id("cnv", conversation),),
        )
        row = await cur.fetchone()
    assert row is not None
    assert row["started_by"] == parse_id("agt", alice.agent_id)
    assert (row["workspace_id"], row["title"]) == (acme.workspace_id, "Review PR 42")
    assert sorted(row["participants"]) == sorted(parse_id("agt", a.agent_id) for a in (alice, bob))
    assert row["message_count"] == 3
    assert count_rows(agentbus_db, "conversations") == 1
    assert count_rows(agentbus_db, "messages") == 3
