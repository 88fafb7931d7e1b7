"""service_account: the tenant-side details of a service account; id is its app_user id."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from uuid import UUID

from platformkit.db.scope import Conn

from strataplane.store.rows import maybe, one

_COLUMNS = "id, tenant_id, name, description, owner_team_id, created_by, created_at"

# Columns whose rows keep referencing a user after it acted (no cascade on delete): deleting a
# service account that appears here is refused. Tables added later whose foreign keys to
# app_user do not cascade are caught by the foreign key itself.
ACTED_REFERENCES = (
    ("change_set", "author_id"),
    ("change_set_review", "reviewer_id"),
    ("spec_revision", "created_by"),
    ("operation", "created_by"),
    ("role_binding", "created_by"),
    ("service_account", "created_by"),
)


@dataclass(frozen=True)
class ServiceAccount:
    id: UUID
    tenant_id: UUID
    name: str
    description: str | None
    owner_team_id: UUID | None
    created_by: UUID | None
    created_at: datetime


async def insert_service_account(
    conn: Conn,
    tenant_id: UUID,
    account_id: UUID,
    name: str,
    description: str | None,
    owner_team_id: UUID | None,
    created_by: UUID | None,
) -> ServiceAccount:
    cur = await conn.execute(
        "INSERT INTO service_account (id, tenant_id, name, description, owner_team_id, "
        f"created_by) VALUES (%s, %s, %s, %s, %s, %s) RETURNING {_COLUMNS}",
        (account_id, tenant_id, name, description, owner_team_id, created_by),
    )
    return ServiceAccount(**await one(cur))


async def get_service_account(
    conn: Conn, tenant_id: UUID, account_id: UUID
) -> ServiceAccount | None:
    cur = await conn.execute(
        f"SELECT {_COLUMNS} FROM service_account WHERE tenant_id = %s AND id = %s",
        (tenant_id, account_id),
    )
    row = await maybe(cur)
    return ServiceAccount(**row) if row is not None else None


async def list_service_accounts(
    conn: Conn, tenant_id: UUID, *, after: str | None, limit: int
) -> list[ServiceAccount]:
    cur = await conn.execute(
        f"SELECT {_COLUMNS} FROM service_account WHERE tenant_id = %(t)s "
        "AND (%(after)s::text IS NULL OR name > %(after)s) ORDER BY name LIMIT %(limit)s",
        {"t": tenant_id, "after": after, "limit": limit},
    )
    return [ServiceAccount(**row) for row in await cur.fetchall()]


async def update_service_account(
    conn: Conn,
    tenant_id: UUID,
    account_id: UUID,
    *,
    description: str | None,
    owner_team_id: UUID | None,
) -> ServiceAccount | None:
    cur = await conn.execute(
        "UPDATE service_account SET description = %s, owner_team_id = %s "
        f"WHERE tenant_id = %s AND id = %s RETURNING {_COLUMNS}",
        (description, owner_team_id, tenant_id, account_id),
    )
    row = await maybe(cur)
    return ServiceAccount(**row) if row is not None else None


async def acted_in(conn: Conn, user_id: UUID) -> list[str]:
    """``table.column`` of every reference that shows the account acted (it authored,
    reviewed, merged, started an operation, bound a role or created a service account)."""
    found = []
    for table, column in ACTED_REFERENCES:
        cur = await conn.execute(
            f"SELECT 1 FROM {table} WHERE {column} = %s LIMIT 1",  # fixed names above
            (user_id,),
        )
        if await maybe(cur) is not None:
            found.append(f"{table}.{column}")
    return found
