"""The tenant audit chain against the real gateway app, PostgreSQL and NATS: every audited action
is linked in, checkpoints are signed on demand and by the audit job, the chain goes out on
sys.audit.>, exports as JSON Lines, and verification names the first bad row and the checkpoint
it breaks after rows are edited, deleted, reordered or inserted behind the gateway's back."""

from __future__ import annotations

import asyncio
import base64
import itertools
import json
import uuid
from collections.abc import Callable
from typing import Any

import httpx
import nats
import psycopg
import pytest
from agentbus.actions.audit_chain import public_keys, verify_chain_of
from agentbus.cli import app as cli_app
from agentbus.db import SCOPE
from agentbus.gateway.app import audit_job
from agentbus.gateway.context import Gateway
from agentbus.gateway.testkit import World, make_world, owner_token
from agentbus.ids import format_id
from agentbus.store.audit_chain import hashed_event
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from platformkit.audit import Checkpoint, chain_hash, verify_checkpoint
from platformkit.db.scope import tenant_transaction
from typer.testing import CliRunner

Json = dict[str, Any]
CEILING_S = 60.0


async def _tokens(client: httpx.AsyncClient, world: World, count: int) -> None:
    admin = {"Authorization": f"Bearer {world.token}"}
    for i in range(count):
        reply = await client.post("/v1/tokens", json={"name": f"t{i}"}, headers=admin)
        assert reply.status_code == 201, reply.text


async def _checkpoint(client: httpx.AsyncClient, world: World) -> Json:
    reply = await client.post(
        "/v1/audit/checkpoints", headers={"Authorization": f"Bearer {world.token}"}
    )
    assert reply.status_code == 201, reply.text
    return dict(reply.json())


async def _verify(client: httpx.AsyncClient, world: World) -> Json:
    reply = await client.get("/v1/audit/verify", headers={"Authorization": f"Bearer {world.token}"})
    assert reply.status_code == 200, reply.text
    return dict(reply.json())


async def _chain(gw: Gateway, client: httpx.AsyncClient, slug: str = "acme") -> World:
    """A chain of: the tenant's own setup actions, three token creations, a checkpoint, three
    more, a checkpoint (each checkpoint request is audited first), two more."""
    world = await make_world(gw, slug)
    await _tokens(client, world, 3)
    await _checkpoint(client, world)
    await _tokens(client, world, 3)
    await _checkpoint(client, world)
    await _tokens(client, world, 2)
    return world


def _seqs(url: str, tenant: uuid.UUID) -> list[Json]:
    with psycopg.connect(url) as conn:
        conn.row_factory = psycopg.rows.dict_row
        return conn.execute(
            "SELECT * FROM audit_chain WHERE tenant_id = %s ORDER BY seq", (tenant,)
        ).fetchall()


async def test_actions_checkpoints_events_and_export(
    gateway: Gateway, gateway_client: httpx.AsyncClient, nats_url: str
) -> None:
    client = gateway_client
    world = await _chain(gateway, client)
    reader = await owner_token(gateway, world, ["read_audit"])

    rows = (await client.get("/v1/audit/events?limit=1000", headers=reader)).json()["items"]
    assert [r["seq"] for r in rows] == list(range(1, len(rows) + 1))
    kinds = [r["event_kind"] for r in rows]
    assert kinds.count("checkpoint") == 2
    assert sum(r["summary"].startswith("token.create") for r in rows) >= 8
    assert all(r["prev_hash"] == p["row_hash"] for p, r in itertools.pairwise(rows))

    report = await _verify(client, world)
    assert report["ok"], report
    assert report["checkpoints_verified"] == 2
    assert report["checked"] == report["head_seq"] == len(rows)

    # the audit job publishes every row on sys.audit.>, and a due checkpoint first
    job = audit_job(gateway)
    job.checkpoint_interval_s = 0.0
    sent = await job.run_once()
    assert sent == len(rows) + 1
    assert await job.run_once() == 0  # published once, not again
    nc = await nats.connect(nats_url)
    try:
        sub = await nc.jetstream().subscribe(
            f"sys.audit.{world.tenant_id.hex}.>", ordered_consumer=True
        )
        events = [await sub.next_msg(timeout=CEILING_S) for _ in range(sent)]
    finally:
        await nc.close()
    assert [json.loads(e.data)["seq"] for e in events] == list(range(1, sent + 1))
    subjects = {e.subject for e in events}
    assert f"sys.audit.{world.tenant_id.hex}.token.create" in subjects
    assert f"sys.audit.{world.tenant_id.hex}.checkpoint" in subjects

    # JSON Lines export: every row, audit actions with their full row
    export = await client.get("/v1/audit/export", headers=reader)
    assert export.headers["content-type"].startswith("application/jsonl")
    lines = [json.loads(line) for line in export.text.splitlines()]
    assert [line["seq"] for line in lines] == list(range(1, sent + 1))
    actions = [line for line in lines if line["event_kind"] == "audit_action"]
    assert all(line["action"]["id"] == line["event_id"] for line in actions)

    # the public checkpoints verify with the JWKS keys
    tenant = format_id("ten", world.tenant_id)
    public = (await client.get(f"/audit/checkpoints?tenant={tenant}")).json()
    assert len(public["items"]) == 3
    jwks = {k["kid"]: k for k in (await client.get("/.well-known/jwks.json")).json()["keys"]}
    for item in public["items"]:
        raw = base64.urlsafe_b64decode(jwks[item["signing_kid"]]["x"] + "==")
        checkpoint = Checkpoint.from_dict({**item, "hash": item["row_hash"],
                                           "chain": public["chain"]})  # fmt: skip
        assert verify_checkpoint(Ed25519PublicKey.from_public_bytes(raw), checkpoint)

    # reads need read_audit or admin, tenant-wide; another tenant sees none of it
    assert (await client.get("/v1/audit/verify", headers=await owner_token(
        gateway, world, ["send"]))).json()["code"] == "AB-1007"  # fmt: skip
    assert (await client.post("/v1/audit/checkpoints", headers=reader)).status_code == 403
    other = await make_world(gateway, "globex")
    theirs_headers = {"Authorization": f"Bearer {other.token}"}
    theirs = (await client.get("/v1/audit/events?limit=1000", headers=theirs_headers)).json()
    assert {r["tenant_id"] for r in theirs["items"]} == {format_id("ten", other.tenant_id)}


async def test_the_gateway_role_cannot_rewrite_the_chain(
    gateway: Gateway, gateway_client: httpx.AsyncClient
) -> None:
    world = await _chain(gateway, gateway_client)
    for statement in ("UPDATE audit_chain SET summary = 'x'", "DELETE FROM audit_chain"):
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            async with tenant_transaction(gateway.pool, SCOPE, world.tenant_id) as conn:
                await conn.execute(statement)


def _edit(url: str, t: uuid.UUID, seq: int) -> None:
    with psycopg.connect(url) as conn:
        conn.execute("UPDATE audit_chain SET summary = 'token.revoke' WHERE tenant_id = %s"
                     " AND seq = %s", (t, seq))  # fmt: skip


def _edit_action(url: str, t: uuid.UUID, seq: int) -> None:
    with psycopg.connect(url) as conn:
        conn.execute(
            "UPDATE audit_actions SET details = '{\"forged\": true}' WHERE id ="
            " (SELECT event_id FROM audit_chain WHERE tenant_id = %s AND seq = %s)", (t, seq)
        )  # fmt: skip


def _edit_and_rehash(url: str, t: uuid.UUID, seq: int) -> None:
    """Edit a row and recompute every later hash, as someone who knows the hash would."""
    rows = _seqs(url, t)
    with psycopg.connect(url) as conn:
        prev = bytes(rows[seq - 2]["row_hash"])
        for row in rows[seq - 1 :]:
            if row["seq"] == seq:
                row["actor"] = "user:usr_" + "0" * 32
            row["prev_hash"], row["row_hash"] = prev, chain_hash(prev, hashed_event(row))
            conn.execute(
                "UPDATE audit_chain SET actor = %s, prev_hash = %s, row_hash = %s"
                " WHERE tenant_id = %s AND seq = %s",
                (row["actor"], row["prev_hash"], row["row_hash"], t, row["seq"]),
            )
            prev = row["row_hash"]
        conn.execute("UPDATE audit_heads SET row_hash = %s WHERE tenant_id = %s", (prev, t))


def _delete(url: str, t: uuid.UUID, seq: int) -> None:
    with psycopg.connect(url) as conn:
        conn.execute("DELETE FROM audit_chain WHERE tenant_id = %s AND seq = %s", (t, seq))


def _delete_tail(url: str, t: uuid.UUID, seq: int) -> None:
    with psycopg.connect(url) as conn:
        conn.execute("DELETE FROM audit_chain WHERE tenant_id = %s AND seq >= %s", (t, seq))


def _swap(url: str, t: uuid.UUID, seq: int) -> None:
    with psycopg.connect(url) as conn:
        q = "UPDATE audit_chain SET seq = %s WHERE tenant_id = %s AND seq = %s"
        conn.execute(q, (10**9, t, seq))
        conn.execute(q, (seq, t, seq + 1))
        conn.execute(q, (seq + 1, t, 10**9))


def _insert(url: str, t: uuid.UUID, seq: int) -> None:
    """Make room at ``seq`` and put a well-formed row there, linked to its predecessor."""
    rows = _seqs(url, t)
    with psycopg.connect(url) as conn:
        conn.execute("UPDATE audit_chain SET seq = seq + 1000000 WHERE tenant_id = %s"
                     " AND seq >= %s", (t, seq))  # fmt: skip
        conn.execute("UPDATE audit_chain SET seq = seq - 1000000 + 1 WHERE tenant_id = %s"
                     " AND seq >= 1000000", (t,))  # fmt: skip
        forged = {**rows[seq - 1], "seq": seq, "event_id": uuid.uuid4(),
                  "event_kind": "message_event", "summary": "message.accepted",
                  "event_digest": None, "prev_hash": bytes(rows[seq - 2]["row_hash"])}  # fmt: skip
        forged["row_hash"] = chain_hash(forged["prev_hash"], hashed_event(forged))
        columns = ", ".join(forged)
        conn.execute(
            f"INSERT INTO audit_chain ({columns}) VALUES ({', '.join(['%s'] * len(forged))})",
            list(forged.values()),
        )


def _cli_env(gateway: Gateway, url: str) -> dict[str, str]:
    return {"AGENTBUS_DATABASE_URL": url,
            "AGENTBUS_KEYRING_PATH": str(gateway.settings.resolved_keyring_path)}  # fmt: skip


Tamper = Callable[[str, uuid.UUID, int], None]


@pytest.mark.parametrize(
    ("tamper", "reason", "bad_offset", "breaks"),
    [
        (_edit, "hash_mismatch", 0, "second"),
        (_edit_action, "action_changed", 0, "second"),
        (_edit_and_rehash, "checkpoint_signature_bad", None, "second"),
        (_delete, "seq_gap", 0, "second"),
        (_swap, "prev_link_broken", 0, "second"),
        (_insert, "prev_link_broken", 1, "second"),
        (_delete_tail, "truncated", 0, None),
    ],
    ids=["edit", "edit-action", "edit-rehash", "delete", "reorder", "insert", "delete-tail"],
)
async def test_tampering_is_named(
    gateway: Gateway,
    gateway_client: httpx.AsyncClient,
    agentbus_db: str,
    tamper: Tamper,
    reason: str,
    bad_offset: int | None,
    breaks: str | None,
) -> None:
    world = await _chain(gateway, gateway_client)
    rows = _seqs(agentbus_db, world.tenant_id)
    first_cp, second_cp = [int(r["seq"]) for r in rows if r["event_kind"] == "checkpoint"]
    # a token.create row between the two checkpoints (the tail: after the second)
    target = second_cp + 1 if breaks is None else first_cp + 2
    assert rows[target - 1]["event_kind"] == "audit_action"
    tamper(agentbus_db, world.tenant_id, target)

    report = await _verify(gateway_client, world)
    assert not report["ok"]
    assert report["reason"] == reason, report
    if bad_offset is not None:
        assert report["first_bad_seq"] == target + bad_offset, report
    else:  # the rewrite is consistent; the signed checkpoint is what no longer holds
        assert report["first_bad_seq"] == second_cp, report
    shifted = second_cp + (1 if tamper is _insert else 0)
    if breaks is None:
        assert report["broken_checkpoint"] is None
        assert report["last_good_checkpoint"] == second_cp
    else:
        assert report["broken_checkpoint"]["seq"] == shifted, report
        assert report["last_good_checkpoint"] == first_cp

    # the operator's command names the same row and exits 1
    result = await asyncio.to_thread(
        CliRunner().invoke,
        cli_app,
        ["audit", "verify", "--tenant", format_id("ten", world.tenant_id), "--json"],
        env=_cli_env(gateway, agentbus_db),
    )
    assert result.exit_code == 1, result.output
    assert json.loads(result.output)["first_bad_seq"] == report["first_bad_seq"]


async def test_cli_checkpoint_and_export(
    gateway: Gateway, gateway_client: httpx.AsyncClient, agentbus_db: str, tmp_path: Any
) -> None:
    world = await _chain(gateway, gateway_client)
    env = _cli_env(gateway, agentbus_db)
    tenant = format_id("ten", world.tenant_id)
    runner = CliRunner()
    made = await asyncio.to_thread(
        runner.invoke, cli_app, ["audit", "checkpoint", "--tenant", tenant], env=env
    )
    assert made.exit_code == 0, made.output
    out = tmp_path / "chain.jsonl"
    command = ["audit", "export", "--tenant", tenant, "-o", str(out)]
    exported = await asyncio.to_thread(runner.invoke, cli_app, command, env=env)
    assert exported.exit_code == 0, exported.output
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert lines[-1]["event_kind"] == "checkpoint"
    assert lines[-2]["summary"].startswith("audit.checkpoint")
    assert lines[-2]["action"]["actor_type"] == "platform"

    # offline, with the export and the public keys alone
    jwks = tmp_path / "jwks.json"
    jwks.write_text((await gateway_client.get("/.well-known/jwks.json")).text)
    offline = ["audit", "verify-export", str(out), "--jwks", str(jwks), "--json"]
    checked = await asyncio.to_thread(runner.invoke, cli_app, offline, env=env)
    assert checked.exit_code == 0, checked.output
    assert json.loads(checked.output)["checkpoints_verified"] == 3
    for field, reason in (("summary", "hash_mismatch"), ("action", "action_changed")):
        edited = [dict(line) for line in lines]
        victim = next(i for i, line in enumerate(edited) if line["event_kind"] == "audit_action")
        if field == "summary":
            edited[victim]["summary"] = "nothing happened"
        else:
            edited[victim]["action"] = {**edited[victim]["action"], "details": {}}
        out.write_text("".join(json.dumps(line) + "\n" for line in edited))
        broken = await asyncio.to_thread(runner.invoke, cli_app, offline, env=env)
        assert broken.exit_code == 1, broken.output
        report = json.loads(broken.output)
        assert (report["first_bad_seq"], report["reason"]) == (victim + 1, reason)
        assert report["broken_checkpoint"]["seq"] > victim + 1
    verified = await asyncio.to_thread(
        runner.invoke, cli_app, ["audit", "verify", "--tenant", tenant], env=env
    )
    assert verified.exit_code == 0, verified.output
    assert "chain intact" in verified.output
    async with tenant_transaction(gateway.pool, SCOPE, world.tenant_id) as conn:
        report = await verify_chain_of(conn, world.tenant_id, await public_keys(conn))
    assert report.ok
    assert report.checkpoints_verified == 3
