"""Database roles a system's migrations create: an owner and a non-superuser application role.

The owner owns every object (migrations run as it); the application logs in as ``app``, which is
never a superuser and never BYPASSRLS, so row-level security always applies to it. A system may
use one role for both when its tables FORCE row-level security.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg import sql


@dataclass(frozen=True)
class RoleSpec:
    owner: str
    app: str
    app_password: str | None = None
    extra_login_roles: Sequence[str] = ()


async def _create_role(conn: psycopg.AsyncConnection[Any], name: str) -> None:
    exists = await (
        await conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (name,))
    ).fetchone()
    if exists:
        return
    # Another database's migrator may create it a moment later; roles are cluster-wide.
    with contextlib.suppress(psycopg.errors.DuplicateObject):
        await conn.execute(
            sql.SQL("CREATE ROLE {} LOGIN NOSUPERUSER NOBYPASSRLS NOCREATEDB NOCREATEROLE").format(
                sql.Identifier(name)
            )
        )


async def ensure_roles(conn: psycopg.AsyncConnection[Any], roles: RoleSpec) -> None:
    for name in (roles.owner, roles.app, *roles.extra_login_roles):
        await _create_role(conn, name)
    owner = sql.Identifier(roles.owner)
    app = sql.Identifier(roles.app)
    dbname = (await (await conn.execute("SELECT current_database()")).fetchone() or [""])[0]
    database = sql.Identifier(dbname)
    # A non-superuser administrator needs membership to SET ROLE to the owner.
    superuser = (
        await (
            await conn.execute("SELECT rolsuper FROM pg_roles WHERE rolname = current_user")
        ).fetchone()
        or [False]
    )[0]
    if not superuser:
        await conn.execute(sql.SQL("GRANT {} TO CURRENT_USER").format(owner))
    await conn.execute(
        sql.SQL("GRANT CONNECT, CREATE ON DATABASE {} TO {}").format(database, owner)
    )
    await conn.execute(sql.SQL("GRANT CREATE ON SCHEMA public TO {}").format(owner))
    if roles.app_password is not None:
        await conn.execute(
            sql.SQL("ALTER ROLE {} PASSWORD {}").format(app, sql.Literal(roles.app_password))
        )
    if roles.app == roles.owner:
        return
    await conn.execute(sql.SQL("GRANT CONNECT ON DATABASE {} TO {}").format(database, app))
    # Whatever the owner creates later is usable by the application; a migration may still
    # REVOKE on a table the application must not change (an append-only audit log, say).
    for stmt in (
        "ALTER DEFAULT PRIVILEGES FOR ROLE {o} GRANT USAGE ON SCHEMAS TO {a}",
        "ALTER DEFAULT PRIVILEGES FOR ROLE {o} GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES"
        " TO {a}",
        "ALTER DEFAULT PRIVILEGES FOR ROLE {o} GRANT USAGE, SELECT ON SEQUENCES TO {a}",
        "ALTER DEFAULT PRIVILEGES FOR ROLE {o} GRANT EXECUTE ON FUNCTIONS TO {a}",
    ):
        await conn.execute(sql.SQL(stmt).format(o=owner, a=app))
