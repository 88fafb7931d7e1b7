"""Verifying, checkpointing and exporting a tenant's audit chain (data model §2.5, decision 0048).

``verify_chain_of`` walks the chain in seq order and stops at the first row that fails, in this
order per row: its seq (a gap is a deleted row, a step back a reordered or inserted one), its
link to the previous row's hash, its own hash, then for a checkpoint row its Ed25519 signature
under the signing key it names (retired keys stay in ``signing_keys_public``, so old
checkpoints stay verifiable), and for an audit action the ``audit_actions`` row it stands for
(missing or changed). After the last row, the chain must end where its head says. The report
names the first bad row and the checkpoint it breaks: the first checkpoint at or after that row,
whose signed hash no longer follows from the rows before it.
"""

from __future__ import annotations

import base64
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from platformkit.audit import GENESIS, Checkpoint, sign_checkpoint, verify_chain, verify_checkpoint
from platformkit.db.scope import Conn
from wirekit import canonical_json

from agentbus.actions.access import require_tenant_admin, tenant_scope
from agentbus.actions.audit import record_action
from agentbus.actions.context import Ctx
from agentbus.ids import format_id
from agentbus.store import audit_actions, audit_chain
from agentbus.store.audit_chain import Row, chain_name, hashed_event, ts_text


@dataclass(frozen=True)
class _Link:
    seq: int
    event: dict[str, Any]
    prev_hash: bytes
    hash: bytes


@dataclass
class ChainReport:
    tenant_id: str
    ok: bool
    checked: int
    head_seq: int
    checkpoints_verified: int = 0
    last_good_checkpoint: int | None = None
    first_bad_seq: int | None = None
    reason: str | None = None
    detail: str = ""
    broken_checkpoint: dict[str, Any] | None = field(default=None)

    def view(self) -> dict[str, Any]:
        return asdict(self)


async def public_keys(conn: Conn) -> dict[str, Ed25519PublicKey]:
    """Every signing key's public half, retired ones included."""
    cur = await conn.execute("SELECT kid, public_key FROM signing_keys_public")
    return {
        r["kid"]: Ed25519PublicKey.from_public_bytes(bytes(r["public_key"]))
        for r in await cur.fetchall()
    }


def checkpoint_of(row: Row) -> Checkpoint:
    return Checkpoint(
        seq=int(row["seq"]), hash=bytes(row["row_hash"]), signature=bytes(row["signature"]),
        chain=chain_name(row["tenant_id"]),
    )  # fmt: skip


def row_problem(
    row: Row, keys: dict[str, Ed25519PublicKey], action: dict[str, Any] | None
) -> tuple[str, str] | None:
    """A linked row's own faults: a checkpoint's signature, an audit action's row."""
    if row["event_kind"] == "checkpoint":
        key = keys.get(row["signing_kid"] or "")
        if key is None:
            return "checkpoint_key_unknown", f"no signing key {row['signing_kid']}"
        if not verify_checkpoint(key, checkpoint_of(row)):
            return "checkpoint_signature_bad", "the signature does not cover this hash"
    elif row["event_kind"] == "audit_action":
        if action is None:
            return "action_missing", f"audit action {row['event_id']} is gone"
        digest = audit_chain.action_digest(action)
        if row["event_digest"] is None or bytes(row["event_digest"]) != digest:
            return "action_changed", f"audit action {row['event_id']} was changed"
    return None


async def _extra_check(
    conn: Conn, tenant_id: uuid.UUID, rows: list[Row], keys: dict[str, Ed25519PublicKey]
) -> tuple[int, str, str] | None:
    """(index, reason, detail) of the first row whose signature or action row is wrong."""
    ids = [r["event_id"] for r in rows if r["event_kind"] == "audit_action"]
    actions = await audit_actions.actions_by_id(conn, tenant_id, ids) if ids else {}
    for i, row in enumerate(rows):
        problem = row_problem(row, keys, actions.get(row["event_id"]))
        if problem is not None:
            return i, *problem
    return None


async def _broken_checkpoint(conn: Conn, tenant_id: uuid.UUID, seq: int) -> dict[str, Any] | None:
    found = await audit_chain.checkpoints(conn, tenant_id, after_seq=seq - 1, limit=1)
    if not found:
        return None
    row = found[0]
    return {"seq": int(row["seq"]), "signing_kid": row["signing_kid"], "at": ts_text(row["at"])}


async def verify_chain_of(
    conn: Conn, tenant_id: uuid.UUID, keys: dict[str, Ed25519PublicKey]
) -> ChainReport:
    """Walk the tenant's chain (in its scope) and report the first bad row, if any."""
    head = await audit_chain.head(conn, tenant_id)
    report = ChainReport(format_id("ten", tenant_id), True, 0, int(head["seq"]) if head else 0)
    prev, next_seq = GENESIS, 1
    async for rows in audit_chain.iter_rows(conn, tenant_id):
        links = [
            _Link(int(r["seq"]), hashed_event(r), bytes(r["prev_hash"]), bytes(r["row_hash"]))
            for r in rows
        ]
        walked = verify_chain(links, start_prev=prev, start_seq=next_seq)
        good = rows if walked.ok else rows[: walked.checked]
        broken = await _extra_check(conn, tenant_id, good, keys)
        if broken is not None:
            index, reason, detail = broken
        elif not walked.ok:
            index, reason, detail = walked.checked, str(walked.reason), walked.detail
        else:
            index = -1
        for row in good[: index if index >= 0 else None]:
            if row["event_kind"] == "checkpoint":
                report.checkpoints_verified += 1
                report.last_good_checkpoint = int(row["seq"])
        if index >= 0:
            return await _broken(conn, tenant_id, report, next_seq + index, reason, detail)
        report.checked += len(rows)
        prev, next_seq = bytes(rows[-1]["row_hash"]), next_seq + len(rows)
    last = next_seq - 1
    if last < report.head_seq:
        detail = f"the chain ends at seq {last}; its head is at {report.head_seq}"
        return await _broken(conn, tenant_id, report, last + 1, "truncated", detail)
    if last > report.head_seq:
        detail = f"rows after seq {report.head_seq}, which the head never reached"
        return await _broken(conn, tenant_id, report, report.head_seq + 1, "beyond_head", detail)
    return report


async def _broken(
    conn: Conn, tenant_id: uuid.UUID, report: ChainReport, seq: int, reason: str, detail: str
) -> ChainReport:
    report.ok, report.first_bad_seq, report.reason, report.detail = False, seq, reason, detail
    report.checked = seq - 1
    report.broken_checkpoint = await _broken_checkpoint(conn, tenant_id, seq)
    return report


async def verify_tenant(ctx: Ctx, tenant_id: uuid.UUID) -> ChainReport:
    async with tenant_scope(ctx, tenant_id) as (conn, _tenant):
        await require_tenant_admin(conn, ctx, tenant_id)
        return await verify_chain_of(conn, tenant_id, await public_keys(conn))


Signer = Callable[[], tuple[str, Ed25519PrivateKey]]


async def checkpoint_in(conn: Conn, tenant_id: uuid.UUID, signer: Signer) -> Row:
    """Append a checkpoint row signed by the gateway's current signing key."""
    kid, key = signer()
    chain = chain_name(tenant_id)

    def sign(seq: int, row_hash: bytes) -> bytes:
        return sign_checkpoint(key, seq, row_hash, chain=chain).signature

    return await audit_chain.append_checkpoint(conn, tenant_id, kid, sign)


async def checkpoint_tenant(ctx: Ctx, tenant_id: uuid.UUID, signer: Signer) -> Row:
    """On demand (a tenant owner or admin, or the operator); audited before it is signed, so
    the checkpoint covers its own request."""
    async with tenant_scope(ctx, tenant_id) as (conn, _tenant):
        await require_tenant_admin(conn, ctx, tenant_id)
        await record_action(conn, ctx, tenant_id, "audit.checkpoint", target_type="tenant",
                            target_id=format_id("ten", tenant_id))  # fmt: skip
        return await checkpoint_in(conn, tenant_id, signer)


def b64(raw: bytes | None) -> str | None:
    return None if raw is None else base64.urlsafe_b64encode(raw).decode().rstrip("=")


def row_view(row: Row, action: dict[str, Any] | None = None) -> dict[str, Any]:
    digest = row["event_digest"]
    view: dict[str, Any] = {
        "tenant_id": format_id("ten", row["tenant_id"]),
        "seq": int(row["seq"]),
        "at": ts_text(row["at"]),
        "event_id": str(row["event_id"]),
        "event_kind": row["event_kind"],
        "actor": row["actor"],
        "summary": row["summary"],
        "prev_hash": bytes(row["prev_hash"]).hex(),
        "row_hash": bytes(row["row_hash"]).hex(),
        "signature": b64(None if row["signature"] is None else bytes(row["signature"])),
        "signing_kid": row["signing_kid"],
        "event_digest": None if digest is None else bytes(digest).hex(),
    }
    if action is not None:
        view["action"] = {
            k: (str(v) if isinstance(v, uuid.UUID) else ts_text(v) if k == "at" else v)
            for k, v in action.items()
        }
    return view


async def export_lines(
    conn: Conn, tenant_id: uuid.UUID, *, from_seq: int = 1, to_seq: int | None = None
) -> AsyncIterator[bytes]:
    """JSON Lines: one chain row a line in seq order, audit actions with their full row."""
    async for rows in audit_chain.iter_rows(conn, tenant_id, from_seq=from_seq, to_seq=to_seq):
        ids = [r["event_id"] for r in rows if r["event_kind"] == "audit_action"]
        actions = await audit_actions.actions_by_id(conn, tenant_id, ids) if ids else {}
        for row in rows:
            yield canonical_json(row_view(row, actions.get(row["event_id"]))) + b"\n"


async def list_rows(
    conn: Conn, tenant_id: uuid.UUID, *, from_seq: int, to_seq: int | None, limit: int
) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    async for rows in audit_chain.iter_rows(
        conn, tenant_id, from_seq=from_seq, to_seq=to_seq, batch=limit
    ):
        out = [row_view(r) for r in rows]
        break
    return out
