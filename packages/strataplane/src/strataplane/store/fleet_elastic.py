"""Elastic Agent's tables: the action queue (``agent_action``), component and unit state
(``agent_component``) and the check-in's writes to ``agent_instance``
(docs/strataplane/agents/elastic-agent.md)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

from platformkit.db.scope import Conn
from platformkit.ids import uuid7
from psycopg.types.json import Jsonb

from strataplane.store.fleet_reports import ReportRow
from strataplane.store.rows import maybe

__all__ = [
    "Action",
    "Component",
    "ack",
    "add_action",
    "add_policy_change",
    "checkin_row",
    "checkin_rows",
    "components",
    "deliver_pending",
    "latest_policies",
    "latest_policy",
    "mark_served",
    "pending_actions",
    "policies_at",
    "policy_failed",
    "put_components",
    "quiet_desired",
    "replace_token_hash",
    "set_replace_token",
    "supersede_pending",
]

_ROW = (
    "id, health::text AS health, sync::text AS sync, sync_reason, version, desired_artifact, "
    "desired_revision_id, served_artifact, applied_artifact, applied_revision_id, last_seen_at"
)
_ACTION = (
    "id, type, data, artifact, policy_seq, created_at, delivered_at, acked_at, ack_error, "
    "superseded_by"
)


@dataclass(frozen=True)
class Action:
    id: UUID
    type: str
    data: dict[str, Any]
    artifact: bytes | None
    policy_seq: int | None
    created_at: datetime
    delivered_at: datetime | None
    acked_at: datetime | None
    ack_error: str | None
    superseded_by: UUID | None


def _action(row: dict[str, Any]) -> Action:
    art = row["artifact"]
    return Action(**{**row, "artifact": bytes(art) if art is not None else None})


@dataclass(frozen=True)
class Component:
    component_id: str
    unit_id: str
    unit_type: str | None
    state: str
    message: str | None
    payload: dict[str, Any] | None


async def replace_token_hash(conn: Conn, tenant_id: UUID, agent_id: UUID) -> bytes | None:
    cur = await conn.execute(
        "SELECT replace_token_hash FROM agent_instance WHERE tenant_id = %s AND id = %s",
        (tenant_id, agent_id),
    )
    row = await maybe(cur)
    found = row["replace_token_hash"] if row is not None else None
    return bytes(found) if found is not None else None


async def set_replace_token(
    conn: Conn, tenant_id: UUID, agent_id: UUID, digest: bytes | None
) -> None:
    await conn.execute(
        "UPDATE agent_instance SET replace_token_hash = %s WHERE tenant_id = %s AND id = %s",
        (digest, tenant_id, agent_id),
    )


async def latest_policy(conn: Conn, tenant_id: UUID, agent_id: UUID) -> Action | None:
    """The agent's newest POLICY_CHANGE (never pruned: its policy_seq is the agent's
    revision_idx)."""
    cur = await conn.execute(
        f"SELECT {_ACTION} FROM agent_action WHERE tenant_id = %s AND agent_instance_id = %s "
        "AND type = 'POLICY_CHANGE' ORDER BY policy_seq DESC LIMIT 1",
        (tenant_id, agent_id),
    )
    row = await maybe(cur)
    return _action(row) if row is not None else None


async def latest_policies(
    conn: Conn, tenant_id: UUID, agent_ids: Sequence[UUID]
) -> dict[UUID, Action]:
    """The newest POLICY_CHANGE of each of many agents."""
    cur = await conn.execute(
        f"SELECT DISTINCT ON (agent_instance_id) agent_instance_id, {_ACTION} FROM agent_action "
        "WHERE tenant_id = %s AND agent_instance_id = ANY(%b) AND type = 'POLICY_CHANGE' "
        "ORDER BY agent_instance_id, policy_seq DESC",
        (tenant_id, list(agent_ids)),
    )
    return {r.pop("agent_instance_id"): _action(r) for r in await cur.fetchall()}


async def policies_at(
    conn: Conn, tenant_id: UUID, seqs: Sequence[tuple[UUID, int]]
) -> dict[UUID, Action]:
    """For each (agent, seq), the agent's POLICY_CHANGE that carried revision_idx ``seq``."""
    if not seqs:
        return {}
    cur = await conn.execute(
        f"SELECT a.agent_instance_id, {', '.join('a.' + c for c in _ACTION.split(', '))} "
        "FROM agent_action a JOIN unnest(%b::uuid[], %b::bigint[]) AS v(agent, seq) "
        "ON a.agent_instance_id = v.agent AND a.policy_seq = v.seq WHERE a.tenant_id = %s "
        "AND a.type = 'POLICY_CHANGE'",
        ([a for a, _s in seqs], [s for _a, s in seqs], tenant_id),
    )
    return {r.pop("agent_instance_id"): _action(r) for r in await cur.fetchall()}


async def add_policy_change(
    conn: Conn, tenant_id: UUID, agent_id: UUID, action_id: UUID, artifact: bytes, seq: int
) -> Action:
    """A new POLICY_CHANGE; the agent's older ones not acknowledged yet are superseded."""
    cur = await conn.execute(
        "INSERT INTO agent_action (id, tenant_id, agent_instance_id, type, artifact, policy_seq) "
        f"VALUES (%s, %s, %s, 'POLICY_CHANGE', %s, %s) RETURNING {_ACTION}",
        (action_id, tenant_id, agent_id, artifact, seq),
    )
    row = await cur.fetchone()
    assert row is not None
    await conn.execute(
        "UPDATE agent_action SET superseded_by = %s WHERE tenant_id = %s "
        "AND agent_instance_id = %s AND type = 'POLICY_CHANGE' AND id <> %s "
        "AND acked_at IS NULL AND superseded_by IS NULL",
        (action_id, tenant_id, agent_id, action_id),
    )
    return _action(row)


async def resend_policies(conn: Conn, tenant_id: UUID, agent_ids: Sequence[UUID]) -> list[UUID]:
    """A new POLICY_CHANGE of the desired artifact for each Elastic Agent among ``agent_ids``
    whose newest one was already delivered: a Secret the policy refers to has a new value, and
    the values are put in only when a POLICY_CHANGE is delivered. The agents given one."""
    cur = await conn.execute(
        "SELECT id, desired_artifact FROM agent_instance WHERE tenant_id = %s AND id = ANY(%b) "
        "AND kind = 'elastic-agent' AND desired_artifact IS NOT NULL ORDER BY id "
        "FOR NO KEY UPDATE",
        (tenant_id, list(agent_ids)),
    )
    rows = {r["id"]: bytes(r["desired_artifact"]) for r in await cur.fetchall()}
    latest = await latest_policies(conn, tenant_id, list(rows))
    resent = []
    for agent_id, artifact in rows.items():
        sent = latest.get(agent_id)
        if sent is None or sent.delivered_at is None or sent.artifact != artifact:
            continue  # the next round queues or delivers one with the values of then
        seq = (sent.policy_seq or 0) + 1
        await add_policy_change(conn, tenant_id, agent_id, uuid7(), artifact, seq)
        resent.append(agent_id)
    return resent


async def add_action(
    conn: Conn,
    tenant_id: UUID,
    agent_id: UUID,
    action_id: UUID,
    kind: str,
    data: dict[str, Any],
    created_by: UUID | None,
) -> None:
    await conn.execute(
        "INSERT INTO agent_action (id, tenant_id, agent_instance_id, type, data, created_by) "
        "VALUES (%s, %s, %s, %s, %s, %s)",
        (action_id, tenant_id, agent_id, kind, Jsonb(data), created_by),
    )


async def supersede_pending(
    conn: Conn, tenant_id: UUID, agent_id: UUID, kind: str, newer: UUID
) -> None:
    """Older unacknowledged actions of ``kind`` give way to ``newer``."""
    await conn.execute(
        "UPDATE agent_action SET superseded_by = %s WHERE tenant_id = %s "
        "AND agent_instance_id = %s AND type = %s AND id <> %s AND acked_at IS NULL "
        "AND superseded_by IS NULL",
        (newer, tenant_id, agent_id, kind, newer),
    )


async def pending_actions(conn: Conn, tenant_id: UUID, agent_id: UUID) -> list[Action]:
    cur = await conn.execute(
        f"SELECT {_ACTION} FROM agent_action WHERE tenant_id = %s AND agent_instance_id = %s "
        "AND acked_at IS NULL AND superseded_by IS NULL "
        "AND (expires_at IS NULL OR expires_at > now()) ORDER BY created_at, id",
        (tenant_id, agent_id),
    )
    return [_action(r) for r in await cur.fetchall()]


async def quiet_desired(conn: Conn, tenant_id: UUID, agent_id: UUID) -> tuple[bytes | None] | None:
    """(the desired artifact,) when the agent has no action pending and its newest
    POLICY_CHANGE is its desired artifact (a check-in would deliver nothing); else None."""
    cur = await conn.execute(
        "SELECT i.desired_artifact FROM agent_instance i WHERE i.tenant_id = %s AND i.id = %s "
        "AND NOT EXISTS (SELECT 1 FROM agent_action p WHERE p.tenant_id = i.tenant_id "
        "AND p.agent_instance_id = i.id AND p.acked_at IS NULL AND p.superseded_by IS NULL "
        "AND (p.expires_at IS NULL OR p.expires_at > now())) AND (i.desired_artifact IS NULL "
        "OR i.desired_artifact = (SELECT l.artifact FROM agent_action l WHERE l.tenant_id = "
        "i.tenant_id AND l.agent_instance_id = i.id AND l.type = 'POLICY_CHANGE' "
        "ORDER BY l.policy_seq DESC LIMIT 1))",
        (tenant_id, agent_id),
    )
    row = await maybe(cur)
    if row is None:
        return None
    desired = row["desired_artifact"]
    return (bytes(desired) if desired is not None else None,)


async def deliver_pending(conn: Conn, tenant_id: UUID, agent_id: UUID) -> list[Action]:
    """The agent's pending actions (not acknowledged, superseded or expired), oldest first,
    marked delivered (``delivered_at`` the first time, ``delivery_count`` every time)."""
    cur = await conn.execute(
        "UPDATE agent_action SET delivered_at = coalesce(delivered_at, now()), "
        "delivery_count = delivery_count + 1 WHERE tenant_id = %s AND agent_instance_id = %s "
        "AND acked_at IS NULL AND superseded_by IS NULL "
        f"AND (expires_at IS NULL OR expires_at > now()) RETURNING {_ACTION}",
        (tenant_id, agent_id),
    )
    return sorted((_action(r) for r in await cur.fetchall()), key=lambda p: (p.created_at, p.id))


async def mark_pending(conn: Conn, tenant_id: UUID, ids: Sequence[UUID]) -> None:
    """Actions a check-in could not hand over after all (a secret withheld): delivered again at
    a later check-in."""
    await conn.execute(
        "UPDATE agent_action SET delivered_at = NULL WHERE tenant_id = %s AND id = ANY(%s)",
        (tenant_id, list(ids)),
    )


async def ack(
    conn: Conn, tenant_id: UUID, agent_id: UUID, action_id: UUID, error: str | None
) -> Action | None:
    """Acknowledge one of the agent's actions; None when it has no such action."""
    cur = await conn.execute(
        "UPDATE agent_action SET acked_at = coalesce(acked_at, now()), "
        "ack_error = coalesce(%s, ack_error) WHERE tenant_id = %s AND agent_instance_id = %s "
        f"AND id = %s RETURNING {_ACTION}",
        (error, tenant_id, agent_id, action_id),
    )
    row = await maybe(cur)
    return _action(row) if row is not None else None


async def policy_failed(
    conn: Conn, tenant_id: UUID, agent_id: UUID, action_id: UUID, message: str
) -> None:
    """The check-in's failure message on a POLICY_CHANGE that was delivered but not applied."""
    await conn.execute(
        "UPDATE agent_action SET ack_error = %s WHERE tenant_id = %s AND agent_instance_id = %s "
        "AND id = %s",
        (message, tenant_id, agent_id, action_id),
    )


async def components(conn: Conn, tenant_id: UUID, agent_id: UUID) -> list[Component]:
    """The components and units the agent reported last, component rows first."""
    cur = await conn.execute(
        "SELECT component_id, unit_id, unit_type, state, message, payload FROM agent_component "
        "WHERE tenant_id = %s AND agent_instance_id = %s ORDER BY component_id, unit_id",
        (tenant_id, agent_id),
    )
    return [Component(**r) for r in await cur.fetchall()]


async def put_components(
    conn: Conn, tenant_id: UUID, reported: dict[UUID, Sequence[Component]]
) -> None:
    """Each agent's current component and unit state replaces what was recorded: rows it no
    longer reports are deleted, changed ones updated, unchanged ones left as they are."""
    if not reported:
        return
    rows = [(a, c) for a, units in reported.items() for c in units]
    await conn.execute(
        "WITH v AS (SELECT * FROM unnest(%(a)b::uuid[], %(c)b::text[], %(u)b::text[], "
        "%(k)b::text[], %(s)b::text[], %(m)b::text[], %(p)b::jsonb[]) AS v(agent, component_id, "
        "unit_id, unit_type, state, message, payload)), gone AS (DELETE FROM agent_component c "
        "WHERE c.tenant_id = %(t)s AND c.agent_instance_id = ANY(%(ids)b::uuid[]) AND NOT EXISTS "
        "(SELECT 1 FROM v WHERE v.agent = c.agent_instance_id AND v.component_id = "
        "c.component_id AND v.unit_id = c.unit_id)) INSERT INTO agent_component (tenant_id, "
        "agent_instance_id, component_id, unit_id, unit_type, state, message, payload) "
        "SELECT %(t)s, * FROM v ON CONFLICT (agent_instance_id, component_id, unit_id) DO UPDATE "
        "SET unit_type = excluded.unit_type, state = excluded.state, message = excluded.message, "
        "payload = excluded.payload, updated_at = now() WHERE (agent_component.unit_type, "
        "agent_component.state, agent_component.message, agent_component.payload) IS DISTINCT "
        "FROM (excluded.unit_type, excluded.state, excluded.message, excluded.payload)",
        {
            "t": tenant_id,
            "ids": list(reported),
            "a": [a for a, _c in rows],
            "c": [c.component_id for _a, c in rows],
            "u": [c.unit_id for _a, c in rows],
            "k": [c.unit_type for _a, c in rows],
            "s": [c.state for _a, c in rows],
            "m": [c.message for _a, c in rows],
            "p": [Jsonb(c.payload) if c.payload is not None else None for _a, c in rows],
        },
    )


async def checkin_row(conn: Conn, tenant_id: UUID, agent_id: UUID) -> tuple[ReportRow, bool] | None:
    """The agent's row as a check-in round reads it, locked, and whether it is approved."""
    cur = await conn.execute(
        f"SELECT {_ROW}, approved_at IS NOT NULL AS approved FROM agent_instance "
        "WHERE tenant_id = %s AND id = %s FOR NO KEY UPDATE",
        (tenant_id, agent_id),
    )
    row = await maybe(cur)
    if row is None:
        return None
    approved = bool(row.pop("approved"))
    return _report_row(row), approved


async def checkin_rows(conn: Conn, tenant_id: UUID, ids: Sequence[UUID]) -> dict[UUID, ReportRow]:
    """The rows of many agents (the caller locked them)."""
    cur = await conn.execute(
        f"SELECT {_ROW} FROM agent_instance WHERE tenant_id = %s AND id = ANY(%b)",
        (tenant_id, list(ids)),
    )
    return {r["id"]: _report_row(r) for r in await cur.fetchall()}


def _report_row(row: dict[str, Any]) -> ReportRow:
    found: dict[str, Any] = {
        k: bytes(v) if isinstance(v, memoryview) else v for k, v in row.items()
    }
    return ReportRow(**found)


async def mark_served(conn: Conn, tenant_id: UUID, agent_id: UUID, artifact: bytes) -> None:
    await conn.execute(
        "UPDATE agent_instance SET served_artifact = %s, served_at = now() "
        "WHERE tenant_id = %s AND id = %s",
        (artifact, tenant_id, agent_id),
    )
