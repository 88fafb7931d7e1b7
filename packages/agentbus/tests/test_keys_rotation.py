"""Key rotation against the real gateway app, PostgreSQL and NATS: a tenant data key rotated on
demand and by the 90-day schedule (new writes under the new version, old payloads readable),
data keys re-wrapped lazily and by the job after the deployment keyring rotates, signing keys
rotated with a 30-day overlap (old credentials accepted until the old key retires, its receipts
verifiable after), and revoked tokens purged after 90 days."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime
from typing import Any

import httpx
import psycopg
from agentbus.controllers.keys import KeyJobs
from agentbus.gateway.actions.receipts import verify_receipt
from agentbus.gateway.actions.signing import SigningKeys, keep_fresh
from agentbus.gateway.context import Gateway
from agentbus.gateway.testkit import SimAgent, alice_and_bob, owner_token, post_envelope
from agentbus.keys import TenantKeyStore
from agentbus.kms import providers_from
from agentbus.tenant_crypto import TenantCrypto

Json = dict[str, Any]


def _admin(world: Any) -> dict[str, str]:
    return {"Authorization": f"Bearer {world.token}"}


async def _send(client: httpx.AsyncClient, alice: SimAgent, bob: SimAgent, text: str) -> Json:
    env = alice.envelope(bob.address, {"text": text})
    answer = await post_envelope(client, alice, env)
    return {"id": env["id"], **answer}


async def _read(client: httpx.AsyncClient, headers: dict[str, str], msg: str) -> Any:
    reply = await client.get(f"/v1/messages/{msg}?include=envelope", headers=headers)
    assert reply.status_code == 200, reply.text
    return reply.json()["envelope"]["data"]


def _sql(url: str, statement: str, *params: Any) -> list[tuple[Any, ...]]:
    with psycopg.connect(url) as conn:
        cur = conn.execute(statement, params)
        return cur.fetchall() if cur.description else []


def _jobs(gateway: Gateway) -> KeyJobs:
    return KeyJobs(gateway.pool, gateway.crypto, gateway.signing)


async def test_data_keys_rotate_and_rewrap(
    gateway: Gateway, gateway_client: httpx.AsyncClient, agentbus_db: str
) -> None:
    client = gateway_client
    world, alice, bob = await alice_and_bob(gateway, client)
    auditor = await owner_token(gateway, world, ["read_audit"])
    first = await _send(client, alice, bob, "under v1")

    rotated = await client.post("/v1/keys/rotate", headers=_admin(world))
    assert rotated.status_code == 201, rotated.text
    assert rotated.json()["version"] == 2
    second = await _send(client, alice, bob, "under v2")
    assert await _read(client, auditor, first["id"]) == {"text": "under v1"}
    assert await _read(client, auditor, second["id"]) == {"text": "under v2"}
    versions = dict(_sql(
        agentbus_db, "SELECT 'msg_' || replace(id::text, '-', ''), dek_version FROM messages"
    ))  # fmt: skip
    assert (versions[first["id"]], versions[second["id"]]) == (1, 2)
    listed = (await client.get("/v1/keys", headers=_admin(world))).json()
    assert [(v["version"], v["status"]) for v in listed["versions"]] == [
        (1, "retired"), (2, "active")]  # fmt: skip
    assert "dek_wrapped" not in listed["versions"][0]
    assert (await client.post("/v1/keys/rotate", headers=auditor)).json()["code"] == "AB-1007"

    # the deployment keyring rotates: a fresh process re-wraps what it unwraps, the job the rest
    new_kek = gateway.keyring.add_key().id
    gateway.crypto = TenantCrypto(
        gateway.pool, TenantKeyStore(gateway.pool), providers_from(gateway.settings,
        gateway.keyring))  # fmt: skip
    assert await _read(client, auditor, first["id"]) == {"text": "under v1"}
    refs = dict(_sql(agentbus_db, "SELECT version, kek_ref FROM tenant_keys WHERE tenant_id = %s",
                     world.tenant_id))  # fmt: skip
    assert refs[1].endswith(f"/{new_kek}")
    assert not refs[2].endswith(f"/{new_kek}")
    assert await _jobs(gateway).rewrap_stale(world.tenant_id) == 1
    refs = dict(_sql(agentbus_db, "SELECT version, kek_ref FROM tenant_keys WHERE tenant_id = %s",
                     world.tenant_id))  # fmt: skip
    assert all(ref.endswith(f"/{new_kek}") for ref in refs.values())
    assert await _read(client, auditor, second["id"]) == {"text": "under v2"}

    # the 90-day schedule: an active key that old is rotated once, audited with its reason
    _sql(agentbus_db, "UPDATE tenant_keys SET created_at = now() - interval '91 days'"
         " WHERE tenant_id = %s AND status = 'active'", world.tenant_id)  # fmt: skip
    gateway.crypto.store.forget(world.tenant_id)
    assert (await _jobs(gateway).run_keys())["data_keys_rotated"] >= 1
    gateway.crypto.store.forget(world.tenant_id)
    assert (await _jobs(gateway).run_keys())["data_keys_rotated"] == 0
    third = await _send(client, alice, bob, "under v3")
    assert await _read(client, auditor, third["id"]) == {"text": "under v3"}
    actions = (await client.get("/v1/audit/actions?action=key.rotate", headers=auditor)).json()
    assert sorted(a["details"]["reason"] for a in actions["items"]) == ["on_demand", "schedule"]


async def test_signing_keys_rotate_with_overlap(
    gateway: Gateway, gateway_client: httpx.AsyncClient, agentbus_db: str
) -> None:
    client = gateway_client
    _world, alice, bob = await alice_and_bob(gateway, client)
    old_receipt = (await _send(client, alice, bob, "signed by the first key"))["receipt"]
    first_kid = old_receipt["kid"]
    jobs = _jobs(gateway)
    assert await jobs.rotate_signing_keys(datetime.now(UTC)) == {"added": None, "retired": []}
    # another process of the gateway, which did not run the job, follows within its interval
    elsewhere = SigningKeys(gateway.keyring)
    await elsewhere.refresh(gateway.pool)
    follower = asyncio.create_task(keep_fresh(elsewhere, gateway.pool, 0.2))

    _sql(agentbus_db, "UPDATE signing_keys SET created_at = now() - interval '151 days'")
    done = await jobs.rotate_signing_keys(datetime.now(UTC))
    assert done["added"] is not None
    assert done["retired"] == []
    assert gateway.signing.signer_kid == done["added"]
    # overlap: the credential signed by the first key still sends; receipts use the new key
    new_receipt = (await _send(client, alice, bob, "after the renewal"))["receipt"]
    assert new_receipt["kid"] == done["added"]
    assert (await client.get("/v1/inbox", headers=alice.headers())).status_code == 200

    _sql(agentbus_db, "UPDATE signing_keys SET created_at = now() - interval '181 days'"
         " WHERE kid = %s", first_kid)  # fmt: skip
    _sql(agentbus_db, "UPDATE signing_keys SET created_at = now() - interval '31 days'"
         " WHERE kid = %s", done["added"])  # fmt: skip
    assert await jobs.rotate_signing_keys(datetime.now(UTC)) == {
        "added": None,
        "retired": [first_kid],
    }
    refused = await client.get("/v1/inbox", headers=alice.headers())
    assert refused.status_code == 401, refused.text
    jwks = {k["kid"]: k for k in (await client.get("/.well-known/jwks.json")).json()["keys"]}
    assert "retired_at" in jwks[first_kid]
    assert verify_receipt(gateway.signing, old_receipt)
    assert verify_receipt(gateway.signing, new_receipt)
    deadline = asyncio.get_running_loop().time() + 60
    while elsewhere.usable_public(first_kid) is not None:
        assert asyncio.get_running_loop().time() < deadline, "the other process never caught up"
        await asyncio.sleep(0.1)
    assert elsewhere.signer_kid == done["added"]
    follower.cancel()


async def test_revoked_tokens_are_purged_after_90_days(
    gateway: Gateway, gateway_client: httpx.AsyncClient, agentbus_db: str
) -> None:
    client = gateway_client
    world, _alice, _bob = await alice_and_bob(gateway, client)
    ids = []
    for name in ("old", "recent"):
        made = await client.post("/v1/tokens", json={"name": name}, headers=_admin(world))
        ids.append(made.json()["id"])
        gone = await client.request("DELETE", f"/v1/tokens/{ids[-1]}", headers=_admin(world))
        assert gone.status_code == 200, gone.text
    old = uuid.UUID(hex=ids[0][4:])
    _sql(agentbus_db, "UPDATE integration_tokens SET revoked_at = now() - interval '91 days'"
         " WHERE id = %s", old)  # fmt: skip
    assert await _jobs(gateway).purge_tokens() == 1
    left = {r[0] for r in _sql(agentbus_db, "SELECT id FROM integration_tokens")}
    assert old not in left
    assert uuid.UUID(hex=ids[1][4:]) in left
    auditor = await owner_token(gateway, world, ["read_audit"])
    [purge] = (await client.get("/v1/audit/actions?action=token.purge", headers=auditor)).json()[
        "items"]  # fmt: skip
    assert purge["details"]["tokens"] == [ids[0]]
    revokes = (await client.get(f"/v1/audit/actions?target={ids[0]}", headers=auditor)).json()
    assert [a["action"] for a in revokes["items"]] == ["token.revoke", "token.create"]
