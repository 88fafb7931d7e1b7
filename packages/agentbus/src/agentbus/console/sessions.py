"""Console sign-in: one-time links and session cookies (``console_sign_in_links``,
``console_sessions``, migration 0022), for the tenant's owners and admins only (tenant roles of
the data model §1.3). Links last 15 minutes and work once; sessions last 12 hours. Every request
re-reads the session, the user and the role, so a revoked session, a disabled user or a demoted
role stops at the next page. A user's expired links go when a new link is minted for them, and
their expired sessions when they sign in, so neither table grows with every sign-in."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from platformkit.db.scope import Pool, tenant_transaction
from platformkit.http import session_secrets as secrets_
from platformkit.ids import uuid7

from agentbus.db import SCOPE
from agentbus.errors import NotFound, RoleRequired

LINK_TTL = timedelta(minutes=15)
SESSION_TTL = timedelta(hours=12)
CONSOLE_ROLES = ("owner", "admin")
COOKIE = "agentbus_console"


@dataclass(frozen=True)
class Operator:
    """A signed-in console user."""

    tenant_id: uuid.UUID
    user_id: uuid.UUID
    session_id: uuid.UUID
    email: str
    role: str
    tenant_slug: str
    csrf: str


_MEMBER = """SELECT u.email, u.status, m.role::text AS role, t.slug
               FROM users u
               JOIN tenant_memberships m ON m.user_id = u.id AND m.tenant_id = u.tenant_id
               JOIN tenants t ON t.id = u.tenant_id
              WHERE u.tenant_id = %s AND u.id = %s"""


async def mint_link(pool: Pool, tenant_id: uuid.UUID, email: str) -> str:
    """A one-time sign-in credential for the tenant's user with ``email`` (owner or admin)."""
    async with tenant_transaction(pool, SCOPE, tenant_id) as conn:
        cur = await conn.execute(
            """SELECT u.id, u.status, m.role::text AS role FROM users u
                 JOIN tenant_memberships m ON m.user_id = u.id AND m.tenant_id = u.tenant_id
                WHERE u.tenant_id = %s AND lower(u.email) = lower(%s)""",
            (tenant_id, email),
        )
        user = await cur.fetchone()
        if user is None or user["status"] != "active":
            raise NotFound("no active user with that e-mail in the tenant")
        if user["role"] not in CONSOLE_ROLES:
            raise RoleRequired("the console is for the tenant's owners and admins")
        link = secrets_.mint(tenant_id, uuid7())
        await conn.execute(
            """INSERT INTO console_sign_in_links (id, tenant_id, user_id, token_hash, expires_at)
               VALUES (%s, %s, %s, %s, now() + %s)""",
            (link.id, tenant_id, user["id"], secrets_.digest(link.secret), LINK_TTL),
        )
        await conn.execute(
            """DELETE FROM console_sign_in_links
                WHERE tenant_id = %s AND user_id = %s AND expires_at <= now()""",
            (tenant_id, user["id"]),
        )
    return str(link)


async def use_link(pool: Pool, text: str) -> str | None:
    """The session cookie's value for a valid, unused link (which is then used up), or None."""
    link = secrets_.parse(text)
    if link is None:
        return None
    async with tenant_transaction(pool, SCOPE, link.tenant_id) as conn:
        cur = await conn.execute(
            """SELECT user_id, token_hash FROM console_sign_in_links
                WHERE tenant_id = %s AND id = %s AND used_at IS NULL AND expires_at > now()
                  FOR UPDATE""",
            (link.tenant_id, link.id),
        )
        row = await cur.fetchone()
        if row is None or not secrets_.matches(row["token_hash"], link.secret):
            return None  # a wrong secret does not use the link up
        await conn.execute(
            "UPDATE console_sign_in_links SET used_at = now() WHERE tenant_id = %s AND id = %s",
            (link.tenant_id, link.id),
        )
        member = await (await conn.execute(_MEMBER, (link.tenant_id, row["user_id"]))).fetchone()
        if member is None or member["status"] != "active" or member["role"] not in CONSOLE_ROLES:
            return None
        session = secrets_.mint(link.tenant_id, uuid7())
        await conn.execute(
            """INSERT INTO console_sessions (id, tenant_id, user_id, secret_hash, expires_at)
               VALUES (%s, %s, %s, %s, now() + %s)""",
            (session.id, link.tenant_id, row["user_id"], secrets_.digest(session.secret),
             SESSION_TTL),
        )  # fmt: skip
        await conn.execute(
            "UPDATE users SET last_login_at = now() WHERE tenant_id = %s AND id = %s",
            (link.tenant_id, row["user_id"]),
        )
        await conn.execute(
            """DELETE FROM console_sessions
                WHERE tenant_id = %s AND user_id = %s AND expires_at <= now()""",
            (link.tenant_id, row["user_id"]),
        )
    return str(session)


async def operator_of(pool: Pool, cookie: str | None) -> Operator | None:
    """The signed-in owner or admin behind the cookie, or None."""
    session = secrets_.parse(cookie)
    if session is None:
        return None
    async with tenant_transaction(pool, SCOPE, session.tenant_id) as conn:
        cur = await conn.execute(
            """SELECT user_id, secret_hash FROM console_sessions
                WHERE tenant_id = %s AND id = %s AND revoked_at IS NULL AND expires_at > %s""",
            (session.tenant_id, session.id, datetime.now(UTC)),
        )
        row = await cur.fetchone()
        if row is None or not secrets_.matches(row["secret_hash"], session.secret):
            return None
        member = await (await conn.execute(_MEMBER, (session.tenant_id, row["user_id"]))).fetchone()
    if member is None or member["status"] != "active" or member["role"] not in CONSOLE_ROLES:
        return None
    csrf = secrets_.csrf_token(session.secret)
    return Operator(session.tenant_id, row["user_id"], session.id, member["email"],
                    member["role"], member["slug"], csrf)  # fmt: skip


async def sign_out(pool: Pool, op: Operator) -> None:
    async with tenant_transaction(pool, SCOPE, op.tenant_id) as conn:
        await conn.execute(
            "UPDATE console_sessions SET revoked_at = now() WHERE tenant_id = %s AND id = %s",
            (op.tenant_id, op.session_id),
        )
