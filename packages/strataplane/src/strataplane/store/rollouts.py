"""rollout, rollout_stage and rollout_assignment (schema: rollout ...). Every function takes the
tenant; the caller holds the tenant transaction."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

from platformkit.db.scope import Conn
from psycopg.types.json import Jsonb

from strataplane.domain.rollouts import ACTIVE, StageAgent, StagePlan

_COLUMNS = (
    "id, number, agent_kind::text AS agent_kind, from_revision_id, to_revision_id, policy_name, "
    "guardrails, state::text AS state, created_by, created_at, finished_at, halt_reason"
)


@dataclass(frozen=True)
class Rollout:
    id: UUID
    number: int
    agent_kind: str
    from_revision_id: int
    to_revision_id: int
    policy_name: str | None
    guardrails: dict[str, Any]
    state: str
    created_by: UUID | None
    created_at: datetime
    finished_at: datetime | None
    halt_reason: str | None

    @property
    def active(self) -> bool:
        return self.state in ACTIVE


@dataclass(frozen=True)
class Stage:
    idx: int
    name: str
    selector: dict[str, Any]
    bake_time: timedelta
    state: str
    agents_total: int | None
    guardrails: dict[str, Any] | None
    started_at: datetime | None
    finished_at: datetime | None


async def insert_rollout(
    conn: Conn,
    tenant_id: UUID,
    rollout_id: UUID,
    *,
    number: int,
    agent_kind: str,
    from_revision_id: int,
    to_revision_id: int,
    policy_name: str | None,
    guardrails: dict[str, Any],
    created_by: UUID | None,
    stages: Sequence[StagePlan],
) -> None:
    await conn.execute(
        "INSERT INTO rollout (id, tenant_id, number, agent_kind, from_revision_id, "
        "to_revision_id, policy_name, guardrails, created_by) "
        "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)",
        (
            rollout_id,
            tenant_id,
            number,
            agent_kind,
            from_revision_id,
            to_revision_id,
            policy_name,
            Jsonb(guardrails),
            created_by,
        ),
    )
    async with conn.cursor() as cur:
        await cur.executemany(
            "INSERT INTO rollout_stage (tenant_id, rollout_id, idx, name, selector, bake_time) "
            "VALUES (%s, %s, %s, %s, %s, %s)",
            [
                (tenant_id, rollout_id, i, s.name, Jsonb(dict(s.selector)), s.bake)
                for i, s in enumerate(stages)
            ],
        )


def _rollout(row: dict[str, Any]) -> Rollout:
    return Rollout(**row)


async def get_rollout(
    conn: Conn, tenant_id: UUID, ref: UUID | int, *, lock: bool = False
) -> Rollout | None:
    """By id, or by number (RO-17 is 17)."""
    where = "id = %s" if isinstance(ref, UUID) else "number = %s"
    cur = await conn.execute(
        f"SELECT {_COLUMNS} FROM rollout WHERE tenant_id = %s AND {where}"
        + (" FOR UPDATE" if lock else ""),
        (tenant_id, ref),
    )
    row = await cur.fetchone()
    return None if row is None else _rollout(row)


async def active_rollout(
    conn: Conn, tenant_id: UUID, agent_kind: str, *, lock: bool = False
) -> Rollout | None:
    cur = await conn.execute(
        f"SELECT {_COLUMNS} FROM rollout WHERE tenant_id = %s AND agent_kind = %s "
        "AND state IN ('running', 'paused', 'halted')" + (" FOR UPDATE" if lock else ""),
        (tenant_id, agent_kind),
    )
    row = await cur.fetchone()
    return None if row is None else _rollout(row)


async def list_rollouts(
    conn: Conn, tenant_id: UUID, *, state: str | None = None, limit: int = 50
) -> list[Rollout]:
    cur = await conn.execute(
        f"SELECT {_COLUMNS} FROM rollout WHERE tenant_id = %s "
        "AND (%s::text IS NULL OR state::text = %s) ORDER BY number DESC LIMIT %s",
        (tenant_id, state, state, limit),
    )
    return [_rollout(r) for r in await cur.fetchall()]


async def set_state(
    conn: Conn,
    tenant_id: UUID,
    rollout_id: UUID,
    state: str,
    *,
    halt_reason: str | None = None,
    keep_reason: bool = False,
) -> None:
    await conn.execute(
        "UPDATE rollout SET state = %s::rollout_state, "
        "halt_reason = CASE WHEN %s THEN halt_reason ELSE %s END, "
        "finished_at = CASE WHEN %s IN ('completed', 'aborted') THEN now() END "
        "WHERE tenant_id = %s AND id = %s",
        (state, keep_reason, halt_reason, state, tenant_id, rollout_id),
    )


async def stages(conn: Conn, tenant_id: UUID, rollout_id: UUID) -> list[Stage]:
    cur = await conn.execute(
        "SELECT idx, name, selector, bake_time, state::text AS state, agents_total, guardrails, "
        "started_at, finished_at FROM rollout_stage WHERE tenant_id = %s AND rollout_id = %s "
        "ORDER BY idx",
        (tenant_id, rollout_id),
    )
    return [Stage(**r) for r in await cur.fetchall()]


async def start_stage(
    conn: Conn,
    tenant_id: UUID,
    rollout_id: UUID,
    idx: int,
    agents: Sequence[tuple[UUID, str]],
) -> None:
    """Assign (agent, baseline health) to the stage and start its bake time; a stage that
    takes no agent is skipped."""
    if agents:
        await conn.execute(
            "INSERT INTO rollout_assignment (tenant_id, rollout_id, agent_instance_id, "
            "stage_idx, baseline_health) SELECT %s, %s, a, %s, h::agent_health "
            "FROM unnest(%b::uuid[], %b::text[]) AS v(a, h) ON CONFLICT DO NOTHING",
            (tenant_id, rollout_id, idx, [a for a, _ in agents], [h for _, h in agents]),
        )
    await conn.execute(
        "UPDATE rollout_stage SET state = %s::rollout_stage_state, agents_total = %s, "
        "started_at = now(), finished_at = CASE WHEN %s = 0 THEN now() END "
        "WHERE tenant_id = %s AND rollout_id = %s AND idx = %s",
        (
            "running" if agents else "skipped",
            len(agents),
            len(agents),
            tenant_id,
            rollout_id,
            idx,
        ),
    )


async def finish_stage(
    conn: Conn,
    tenant_id: UUID,
    rollout_id: UUID,
    idx: int,
    state: str,
    values: dict[str, Any] | None,
) -> None:
    await conn.execute(
        "UPDATE rollout_stage SET state = %s::rollout_stage_state, guardrails = %s, "
        "finished_at = now() WHERE tenant_id = %s AND rollout_id = %s AND idx = %s",
        (state, Jsonb(values) if values is not None else None, tenant_id, rollout_id, idx),
    )


async def end_bake(conn: Conn, tenant_id: UUID, rollout_id: UUID, idx: int) -> None:
    """Advance: the running stage's bake time ends now (its start moves back)."""
    await conn.execute(
        "UPDATE rollout_stage SET started_at = least(started_at, now() - bake_time) "
        "WHERE tenant_id = %s AND rollout_id = %s AND idx = %s AND state = 'running'",
        (tenant_id, rollout_id, idx),
    )


async def assigned(conn: Conn, tenant_id: UUID, rollout_id: UUID) -> dict[UUID, int]:
    cur = await conn.execute(
        "SELECT agent_instance_id, stage_idx FROM rollout_assignment "
        "WHERE tenant_id = %s AND rollout_id = %s",
        (tenant_id, rollout_id),
    )
    return {r["agent_instance_id"]: r["stage_idx"] for r in await cur.fetchall()}


async def stage_agents(
    conn: Conn, tenant_id: UUID, rollout_id: UUID, idx: int
) -> list[tuple[UUID, StageAgent]]:
    cur = await conn.execute(
        "SELECT a.id, a.sync::text AS sync, a.health::text AS health, "
        "r.baseline_health::text AS baseline, h.kind::text AS host_kind "
        "FROM rollout_assignment r JOIN agent_instance a "
        "ON a.tenant_id = r.tenant_id AND a.id = r.agent_instance_id "
        "JOIN host h ON h.tenant_id = a.tenant_id AND h.id = a.host_id "
        "WHERE r.tenant_id = %s AND r.rollout_id = %s AND r.stage_idx = %s ORDER BY a.id",
        (tenant_id, rollout_id, idx),
    )
    return [
        (r["id"], StageAgent(r["sync"], r["health"], r["baseline"], r["host_kind"]))
        for r in await cur.fetchall()
    ]


async def progress(conn: Conn, tenant_id: UUID, rollout_id: UUID) -> dict[int, dict[str, int]]:
    """Per stage: agents assigned, in sync, not reporting."""
    cur = await conn.execute(
        "SELECT r.stage_idx, count(*) AS assigned, "
        "count(*) FILTER (WHERE a.sync = 'in_sync') AS in_sync, "
        "count(*) FILTER (WHERE a.health = 'not_reporting') AS not_reporting "
        "FROM rollout_assignment r JOIN agent_instance a "
        "ON a.tenant_id = r.tenant_id AND a.id = r.agent_instance_id "
        "WHERE r.tenant_id = %s AND r.rollout_id = %s GROUP BY r.stage_idx",
        (tenant_id, rollout_id),
    )
    return {
        r["stage_idx"]: {
            "assigned": r["assigned"],
            "inSync": r["in_sync"],
            "notReporting": r["not_reporting"],
        }
        for r in await cur.fetchall()
    }
