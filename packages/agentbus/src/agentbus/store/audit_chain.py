"""audit_chain and audit_heads: one hash chain per tenant (data model §2.5, decision 0048).

Every ``audit_actions`` row of a tenant is linked into its chain in the transaction that writes
it; checkpoint rows carry an Ed25519 signature of the chain's hash at their own seq. The head
row's lock (taken by ``_lock_head``) serialises a tenant's appends until commit, so seqs run
1, 2, 3... and never fork. ``row_hash = chain_hash(prev_hash, hashed_event(row))`` with
platformkit's plain chain; the signature is not hashed (it signs the hash).
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import AsyncIterator, Mapping
from datetime import UTC, datetime
from typing import Any

from platformkit.audit import GENESIS, chain_hash
from platformkit.db.scope import Conn
from platformkit.ids import uuid7
from wirekit import canonical_json

Row = dict[str, Any]

COLUMNS = (
    "tenant_id, seq, at, event_id, event_kind, actor, summary, prev_hash, row_hash, signature,"
    " event_digest, signing_kid"
)
SUMMARY_MAX = 200


def chain_name(tenant_id: uuid.UUID) -> str:
    """The name a checkpoint signs, so one tenant's checkpoint cannot stand for another's."""
    return f"agentbus/tenant/{tenant_id}"


def ts_text(ts: datetime) -> str:
    return ts.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def hashed_event(row: Mapping[str, Any]) -> dict[str, Any]:
    """What ``row_hash`` commits to: every column but the hashes and the signature."""
    digest = row.get("event_digest")
    return {
        "tenant_id": str(row["tenant_id"]),
        "seq": int(row["seq"]),
        "at": ts_text(row["at"]),
        "event_id": str(row["event_id"]),
        "event_kind": row["event_kind"],
        "actor": row["actor"],
        "summary": row["summary"],
        "event_digest": None if digest is None else bytes(digest).hex(),
        "signing_kid": row.get("signing_kid"),
    }


def action_digest(action: Mapping[str, Any]) -> bytes:
    """SHA-256 of an ``audit_actions`` row as stored (read back, so jsonb's form of details)."""
    consent = action["consent_ref"]
    return hashlib.sha256(
        canonical_json(
            {
                "id": str(action["id"]),
                "tenant_id": str(action["tenant_id"]),
                "actor_type": action["actor_type"],
                "actor_id": action["actor_id"],
                "action": action["action"],
                "target_type": action["target_type"],
                "target_id": action["target_id"],
                "consent_ref": None if consent is None else str(consent),
                "details": action["details"],
                "ip": action["ip"],
                "user_agent": action["user_agent"],
                "at": ts_text(action["at"]),
            }
        )
    ).digest()


def action_summary(action: Mapping[str, Any]) -> str:
    """Short, no payload: the action and its target."""
    target = action["target_id"] or ""
    return f"{action['action']} {target}".strip()[:SUMMARY_MAX]


async def _lock_head(conn: Conn, tenant_id: uuid.UUID) -> tuple[int, bytes]:
    cur = await conn.execute(
        """INSERT INTO audit_heads (tenant_id, seq, row_hash) VALUES (%s, 0, %s)
           ON CONFLICT (tenant_id) DO UPDATE SET seq = audit_heads.seq
           RETURNING seq, row_hash""",
        (tenant_id, GENESIS),
    )
    head = await cur.fetchone()
    assert head is not None
    return int(head["seq"]), bytes(head["row_hash"])


async def _insert(conn: Conn, row: Row) -> Row:
    await conn.execute(
        f"""INSERT INTO audit_chain ({COLUMNS})
            VALUES (%(tenant_id)s, %(seq)s, %(at)s, %(event_id)s, %(event_kind)s, %(actor)s,
                    %(summary)s, %(prev_hash)s, %(row_hash)s, %(signature)s, %(event_digest)s,
                    %(signing_kid)s)""",
        row,
    )
    checkpoint = ", checkpoint_seq = %(seq)s, checkpoint_at = %(at)s" if row["signature"] else ""
    await conn.execute(
        f"UPDATE audit_heads SET seq = %(seq)s, row_hash = %(row_hash)s{checkpoint}"
        " WHERE tenant_id = %(tenant_id)s",
        row,
    )
    return row


def _link(row: Row, prev: bytes) -> Row:
    row["prev_hash"] = prev
    row["row_hash"] = chain_hash(prev, hashed_event(row))
    return row


async def append_action(conn: Conn, action: Mapping[str, Any]) -> Row:
    """Link a just-inserted ``audit_actions`` row into its tenant's chain."""
    tenant_id = action["tenant_id"]
    seq, prev = await _lock_head(conn, tenant_id)
    row: Row = {
        "tenant_id": tenant_id,
        "seq": seq + 1,
        "at": datetime.now(UTC),
        "event_id": action["id"],
        "event_kind": "audit_action",
        "actor": f"{action['actor_type']}:{action['actor_id']}",
        "summary": action_summary(action),
        "signature": None,
        "event_digest": action_digest(action),
        "signing_kid": None,
    }
    return await _insert(conn, _link(row, prev))


async def append_checkpoint(conn: Conn, tenant_id: uuid.UUID, kid: str, sign: Any) -> Row:
    """A checkpoint row: ``sign(seq, row_hash)`` gives the signature of its own hash."""
    seq, prev = await _lock_head(conn, tenant_id)
    row: Row = {
        "tenant_id": tenant_id,
        "seq": seq + 1,
        "at": datetime.now(UTC),
        "event_id": uuid7(),
        "event_kind": "checkpoint",
        "actor": "system:audit-checkpoint",
        "summary": f"checkpoint signed by {kid}",
        "event_digest": None,
        "signing_kid": kid,
    }
    _link(row, prev)
    row["signature"] = sign(row["seq"], row["row_hash"])
    return await _insert(conn, row)


async def head(conn: Conn, tenant_id: uuid.UUID) -> Row | None:
    cur = await conn.execute(
        "SELECT tenant_id, seq, row_hash, checkpoint_seq, checkpoint_at, published_seq"
        " FROM audit_heads WHERE tenant_id = %s",
        (tenant_id,),
    )
    return await cur.fetchone()


async def iter_rows(
    conn: Conn, tenant_id: uuid.UUID, *, from_seq: int = 1, to_seq: int | None = None,
    batch: int = 1000,
) -> AsyncIterator[list[Row]]:  # fmt: skip
    """The tenant's rows in seq order, in batches (keyset on seq)."""
    after = from_seq - 1
    while True:
        cur = await conn.execute(
            f"""SELECT {COLUMNS} FROM audit_chain
                 WHERE tenant_id = %s AND seq > %s AND (%s::bigint IS NULL OR seq <= %s)
                 ORDER BY seq LIMIT %s""",
            (tenant_id, after, to_seq, to_seq, batch),
        )
        rows = await cur.fetchall()
        if not rows:
            return
        yield rows
        after = int(rows[-1]["seq"])


async def row_at(conn: Conn, tenant_id: uuid.UUID, seq: int) -> Row | None:
    cur = await conn.execute(
        f"SELECT {COLUMNS} FROM audit_chain WHERE tenant_id = %s AND seq = %s", (tenant_id, seq)
    )
    return await cur.fetchone()


async def checkpoints(
    conn: Conn, tenant_id: uuid.UUID, *, after_seq: int = 0, limit: int = 100
) -> list[Row]:
    cur = await conn.execute(
        f"""SELECT {COLUMNS} FROM audit_chain
             WHERE tenant_id = %s AND event_kind = 'checkpoint' AND seq > %s
             ORDER BY seq LIMIT %s""",
        (tenant_id, after_seq, limit),
    )
    return list(await cur.fetchall())


async def mark_published(conn: Conn, tenant_id: uuid.UUID, seq: int) -> None:
    await conn.execute(
        "UPDATE audit_heads SET published_seq = greatest(published_seq, %s) WHERE tenant_id = %s",
        (seq, tenant_id),
    )


async def pending_heads(conn: Conn) -> list[Row]:
    """Every tenant chain with rows not yet checkpointed or published (all tenants)."""
    cur = await conn.execute("SELECT * FROM audit_heads_pending()")
    return list(await cur.fetchall())
