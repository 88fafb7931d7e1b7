"""pin (schema: pin): an agent or a selector held at a revision."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

from platformkit.db.scope import Conn
from psycopg.types.json import Jsonb

from strataplane.domain.rollouts import Pin

_COLUMNS = (
    "id, selector, agent_kinds::text[] AS agent_kinds, agent_instance_id, revision_id, reason, "
    "created_by, created_at, starts_at, expires_at"
)


@dataclass(frozen=True)
class PinRow:
    id: UUID
    selector: dict[str, Any] | None
    agent_kinds: list[str] | None
    agent_instance_id: UUID | None
    revision_id: int
    reason: str
    created_by: UUID | None
    created_at: datetime
    starts_at: datetime
    expires_at: datetime | None

    def rule(self) -> Pin:
        kinds = tuple(self.agent_kinds) if self.agent_kinds is not None else None
        return Pin(
            self.id,
            self.revision_id,
            self.created_at,
            self.starts_at,
            self.expires_at,
            self.agent_instance_id,
            self.selector,
            kinds,
        )


async def insert_pin(
    conn: Conn,
    tenant_id: UUID,
    pin_id: UUID,
    *,
    revision_id: int,
    reason: str,
    created_by: UUID | None,
    agent_instance_id: UUID | None = None,
    selector: dict[str, Any] | None = None,
    agent_kinds: Sequence[str] | None = None,
    expires_at: datetime | None = None,
) -> PinRow:
    cur = await conn.execute(
        "INSERT INTO pin (id, tenant_id, selector, agent_kinds, agent_instance_id, revision_id, "
        "reason, created_by, expires_at) VALUES (%s, %s, %s, %s::agent_kind[], %s, %s, %s, %s, %s) "
        f"RETURNING {_COLUMNS}",
        (
            pin_id,
            tenant_id,
            Jsonb(selector) if selector is not None else None,
            list(agent_kinds) if agent_kinds is not None else None,
            agent_instance_id,
            revision_id,
            reason,
            created_by,
            expires_at,
        ),
    )
    row = await cur.fetchone()
    assert row is not None
    return PinRow(**row)


async def list_pins(conn: Conn, tenant_id: UUID, *, active_only: bool = False) -> list[PinRow]:
    cur = await conn.execute(
        f"SELECT {_COLUMNS} FROM pin WHERE tenant_id = %s "
        "AND (NOT %s OR expires_at IS NULL OR expires_at > now()) ORDER BY created_at DESC",
        (tenant_id, active_only),
    )
    return [PinRow(**r) for r in await cur.fetchall()]


async def get_pin(conn: Conn, tenant_id: UUID, pin_id: UUID) -> PinRow | None:
    cur = await conn.execute(
        f"SELECT {_COLUMNS} FROM pin WHERE tenant_id = %s AND id = %s", (tenant_id, pin_id)
    )
    row = await cur.fetchone()
    return None if row is None else PinRow(**row)


async def delete_pin(conn: Conn, tenant_id: UUID, pin_id: UUID) -> bool:
    cur = await conn.execute(
        "DELETE FROM pin WHERE tenant_id = %s AND id = %s RETURNING id", (tenant_id, pin_id)
    )
    return await cur.fetchone() is not None
