"""Blobs (claim checks) against the real gateway app, PostgreSQL and NATS (04-API-SPEC §8):
upload sealed at rest, attach, download by the parties of a message that attaches it, refusals
(AB-2020, AB-5007), operators' reads in the audit log, and retention."""

from __future__ import annotations

import asyncio
import base64
import hashlib
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import psycopg
import pytest
from agentbus.controllers.retention import Retention
from agentbus.db import SCOPE
from agentbus.gateway.actions.blobs import attached_blobs, blob_key
from agentbus.gateway.context import Gateway
from agentbus.gateway.domain.wire import b64url_encode
from agentbus.gateway.store import blobs
from agentbus.gateway.store.objectstore import ObjectMissing
from agentbus.gateway.testkit import (
    SimAgent,
    World,
    alice_and_bob,
    enroll,
    make_world,
    owner_token,
    post_envelope,
    post_signed,
)
from agentbus.ids import format_id, parse_id
from agentbus.store import plans
from agentbus.store.audit_actions import list_audit_actions
from platformkit.db.scope import tenant_transaction
from platformkit.ids import uuid7

Json = dict[str, Any]
DIFF = b"--- a/x.py\n+++ b/x.py\n@@ -1 +1 @@\n-old\n+new\n" * 200


async def upload(
    client: httpx.AsyncClient, agent: SimAgent, data: bytes, content_type: str = "text/x-diff"
) -> httpx.Response:
    headers = {**agent.headers(), "Content-Type": content_type}
    return await client.post("/v1/blobs", content=data, headers=headers)


async def uploaded(client: httpx.AsyncClient, agent: SimAgent, data: bytes = DIFF) -> Json:
    reply = await upload(client, agent, data)
    assert reply.status_code == 201, reply.text
    return dict(reply.json())


def attaching(alice: SimAgent, bob: SimAgent, *blob_ids: str) -> Json:
    attachments = [
        {"blob": b, "name": "change.diff", "content_type": "text/x-diff"} for b in blob_ids
    ]
    return alice.envelope(bob.address, {"text": "see the diff", "attachments": attachments})


async def blob_row(gateway: Gateway, world: World, blob_id: str) -> Json | None:
    async with tenant_transaction(gateway.pool, SCOPE, world.tenant_id) as conn:
        cur = await conn.execute(
            "SELECT ref_count, expires_at, s3_key FROM blobs WHERE id = %s",
            (parse_id("blb", blob_id),),
        )
        row = await cur.fetchone()
    return None if row is None else dict(row)


def test_attached_blobs_are_the_distinct_ids_of_attachments_and_artifacts() -> None:
    one, two = uuid7(), uuid7()
    data = {
        "attachments": [{"blob": format_id("blb", one)}, {"blob": format_id("blb", one)}],
        "artifacts": [{"blob": format_id("blb", two)}],
    }
    assert attached_blobs(data) == [one, two]
    assert attached_blobs({"text": "none"}) == []


async def test_a_blob_is_sealed_attached_and_read_by_the_parties(
    gateway: Gateway, gateway_client: httpx.AsyncClient
) -> None:
    client = gateway_client
    world, alice, bob = await alice_and_bob(gateway, client)
    carol = await enroll(client, world, "carol")
    blob = await uploaded(client, alice)
    assert blob["size_bytes"] == len(DIFF)
    assert blob["sha256"] == b64url_encode(hashlib.sha256(DIFF).digest())
    assert blob["content_type"] == "text/x-diff"
    key = blob_key(world.tenant_id, parse_id("blb", blob["id"]))
    assert b"+new" not in await gateway.objects.get(key), "stored sealed, never in the clear"

    path = f"/v1/blobs/{blob['id']}"
    mine = await client.get(path, headers=alice.headers())
    assert (mine.status_code, mine.content) == (200, DIFF)
    assert mine.headers["content-type"] == "text/x-diff", "the type as uploaded"
    assert (
        mine.headers["digest"]
        == "sha-256=" + base64.b64encode(hashlib.sha256(DIFF).digest()).decode()
    )

    before = await blob_row(gateway, world, blob["id"])
    env = attaching(alice, bob, blob["id"], blob["id"])
    answer = await post_envelope(client, alice, env)
    after = await blob_row(gateway, world, blob["id"])
    assert before is not None
    assert after is not None
    assert (before["ref_count"], after["ref_count"]) == (0, 1)
    assert after["expires_at"] >= before["expires_at"]

    reply = await client.get(path, headers=bob.headers())
    assert (reply.status_code, reply.json()["code"]) == (404, "AB-8002")
    assert "?message=" in reply.json()["detail"]
    nowhere = format_id("blb", uuid7())
    absent = await client.get(f"/v1/blobs/{nowhere}", headers=bob.headers())
    assert absent.json()["detail"].replace(nowhere, blob["id"]) == reply.json()["detail"], (
        "the answer does not tell whether another's blob exists"
    )
    reply = await client.get(path, params={"message": env["id"]}, headers=bob.headers())
    assert (reply.status_code, reply.content) == (200, DIFF), reply.text
    reply = await client.get(path, params={"message": env["id"]}, headers=carol.headers())
    assert reply.status_code == 404, "not a party of the message"
    other = alice.envelope(bob.address, {"text": "no attachment here"})
    await post_envelope(client, alice, other)
    reply = await client.get(path, params={"message": other["id"]}, headers=bob.headers())
    assert reply.status_code == 404, "the message named does not attach the blob"
    assert answer["message"]["status"] == "accepted"


async def test_attachments_must_name_live_blobs_of_the_tenant(
    agentbus_db: str, gateway: Gateway, gateway_client: httpx.AsyncClient
) -> None:
    client = gateway_client
    world, alice, bob = await alice_and_bob(gateway, client)
    other = await make_world(gateway, "globex")
    mallory = await enroll(client, other, "mallory")
    theirs = await uploaded(client, mallory)
    expired = await uploaded(client, alice)
    async with await psycopg.AsyncConnection.connect(agentbus_db, autocommit=True) as admin:
        await admin.execute(
            "UPDATE blobs SET expires_at = now() - interval '1 second' WHERE id = %s",
            (parse_id("blb", expired["id"]),),
        )
    live = await uploaded(client, alice)
    for blob_id in (format_id("blb", uuid7()), theirs["id"], expired["id"]):
        env = attaching(alice, bob, live["id"], blob_id)
        reply = await post_signed(client, alice, env)
        assert (reply.status_code, reply.json()["code"]) == (422, "AB-2020"), reply.text
        assert reply.json()["blob"] == blob_id
        status = await client.get(f"/v1/messages/{env['id']}", headers=alice.headers())
        assert status.status_code == 404, "a refused send stores nothing"
    row = await blob_row(gateway, world, live["id"])
    assert row is not None
    assert row["ref_count"] == 0, "a refused send counts no reference"
    reply = await client.get(f"/v1/blobs/{expired['id']}", headers=alice.headers())
    assert reply.status_code == 404


async def test_upload_limits_and_bad_uploads(
    gateway: Gateway, gateway_client: httpx.AsyncClient
) -> None:
    client = gateway_client
    world, alice, _bob = await alice_and_bob(gateway, client)
    async with tenant_transaction(gateway.pool, SCOPE, world.tenant_id) as conn:
        await plans.override_limits(conn, world.tenant_id, {"blob_bytes": 10})
    assert (await upload(client, alice, b"x" * 10)).status_code == 201
    reply = await upload(client, alice, b"x" * 11)
    assert (reply.status_code, reply.json()["code"]) == (413, "AB-5007")
    reply = await upload(client, alice, b"")
    assert (reply.status_code, reply.json()["code"]) == (422, "AB-8001")
    reply = await upload(client, alice, b"x", "t/" + "x" * 126)
    assert (reply.status_code, reply.json()["code"]) == (422, "AB-8001")
    token = {"Authorization": f"Bearer {world.token}", "Content-Type": "text/plain"}
    reply = await client.post("/v1/blobs", content=b"x", headers=token)
    assert reply.status_code == 401, "uploads take an agent credential"


async def test_operators_read_blobs_with_an_audit_row(
    gateway: Gateway, gateway_client: httpx.AsyncClient
) -> None:
    client = gateway_client
    world, alice, _bob = await alice_and_bob(gateway, client)
    blob = await uploaded(client, alice)
    path = f"/v1/blobs/{blob['id']}"
    auditor = await owner_token(gateway, world, ["read_audit"])
    reply = await client.get(path, headers=auditor)
    assert (reply.status_code, reply.content) == (200, DIFF)
    async with tenant_transaction(gateway.pool, SCOPE, world.tenant_id) as conn:
        actions = await list_audit_actions(conn, world.tenant_id, action="blob.view")
    assert [a["target_id"] for a in actions] == [blob["id"]]
    reply = await client.get(path, headers=await owner_token(gateway, world, ["send"]))
    assert (reply.status_code, reply.json()["code"]) == (403, "AB-1007")
    other = await make_world(gateway, "globex")
    reply = await client.get(path, headers={"Authorization": f"Bearer {other.token}"})
    assert reply.status_code == 404


async def test_retention_deletes_expired_blobs_and_keeps_attached_ones(
    agentbus_db: str, gateway: Gateway, gateway_client: httpx.AsyncClient
) -> None:
    client = gateway_client
    world, alice, bob = await alice_and_bob(gateway, client)
    lonely, attached = await uploaded(client, alice), await uploaded(client, alice)
    await post_envelope(client, alice, attaching(alice, bob, attached["id"]))
    async with await psycopg.AsyncConnection.connect(agentbus_db, autocommit=True) as admin:
        await admin.execute(  # as if uploaded a retention ago
            "UPDATE blobs SET expires_at = now() - interval '1 minute' WHERE id = %s",
            (parse_id("blb", lonely["id"]),),
        )
    lonely_row = await blob_row(gateway, world, lonely["id"])
    assert lonely_row is not None
    await Retention(gateway.pool, gateway.objects).run_once()
    assert await blob_row(gateway, world, lonely["id"]) is None
    with pytest.raises(ObjectMissing):
        await gateway.objects.get(lonely_row["s3_key"])
    assert await blob_row(gateway, world, attached["id"]) is not None
    reply = await client.get(f"/v1/blobs/{attached['id']}", headers=alice.headers())
    assert reply.content == DIFF


async def test_retention_leaves_a_blob_a_send_attaches_as_it_expires(
    agentbus_db: str, gateway: Gateway, gateway_client: httpx.AsyncClient
) -> None:
    """A send locks the blob while it was still live; retention, finding it expired a moment
    later, waits for that lock; the send extends the blob and commits; the blob stays."""
    world, alice, _bob = await alice_and_bob(gateway, gateway_client)
    blob = await uploaded(gateway_client, alice)
    blob_id = parse_id("blb", blob["id"])
    async with await psycopg.AsyncConnection.connect(agentbus_db, autocommit=True) as admin:
        await admin.execute(
            "UPDATE blobs SET expires_at = now() + interval '1 second' WHERE id = %s", (blob_id,)
        )
    async with tenant_transaction(gateway.pool, SCOPE, world.tenant_id) as send:
        assert set(await blobs.lock_live(send, world.tenant_id, [blob_id])) == {blob_id}
        await asyncio.sleep(1.5)  # past expires_at now, by the clock retention reads

        async def retention() -> list[str]:
            async with tenant_transaction(gateway.pool, SCOPE, world.tenant_id) as conn:
                return await blobs.delete_expired(conn, world.tenant_id, 10)

        deleting = asyncio.create_task(retention())
        await asyncio.sleep(0.5)
        assert not deleting.done(), "retention waits for the send's lock"
        await blobs.reference(
            send, world.tenant_id, [blob_id], datetime.now(UTC) + timedelta(days=7)
        )
    assert await deleting == []
    assert await blob_row(gateway, world, blob["id"]) is not None
