"""Console sign-in keeps its tables small: a user's expired links go when a new link is minted
for them, and their expired sessions when they sign in; what is still valid stays, and so does
what belongs to another user."""

from __future__ import annotations

import uuid

import psycopg
from agentbus.console.sessions import mint_link, operator_of, use_link
from agentbus.gateway.context import Gateway
from agentbus.gateway.testkit import make_world


async def _sign_in(gw: Gateway, tenant_id: uuid.UUID, email: str) -> str:
    session = await use_link(gw.pool, await mint_link(gw.pool, tenant_id, email))
    assert session is not None
    return session


def _rows(db: str, table: str, tenant_id: uuid.UUID) -> dict[str, int]:
    """Rows of ``table`` in the tenant, by user e-mail."""
    with psycopg.connect(db) as conn:
        found = conn.execute(
            f"""SELECT u.email, count(*) FROM {table} t JOIN users u ON u.id = t.user_id
                 WHERE t.tenant_id = %s GROUP BY u.email""",
            (tenant_id,),
        ).fetchall()
    return dict(found)


def _expire_all(db: str, tenant_id: uuid.UUID) -> None:
    with psycopg.connect(db) as conn:
        for table in ("console_sign_in_links", "console_sessions"):
            conn.execute(
                f"UPDATE {table} SET expires_at = now() - interval '1 minute' WHERE tenant_id = %s",
                (tenant_id,),
            )


async def test_signing_in_again_clears_what_expired(gateway: Gateway, agentbus_db: str) -> None:
    acme, globex = await make_world(gateway, "acme"), await make_world(gateway, "globex")
    owner, other = "owner@acme.example", "owner@globex.example"
    await _sign_in(gateway, acme.tenant_id, owner)
    await mint_link(gateway.pool, acme.tenant_id, owner)  # never used
    await _sign_in(gateway, globex.tenant_id, other)
    _expire_all(agentbus_db, acme.tenant_id)
    _expire_all(agentbus_db, globex.tenant_id)

    session = await _sign_in(gateway, acme.tenant_id, owner)

    assert await operator_of(gateway.pool, session) is not None
    # the owner's two expired links and expired session are gone; the new ones stay
    assert _rows(agentbus_db, "console_sign_in_links", acme.tenant_id) == {owner: 1}
    assert _rows(agentbus_db, "console_sessions", acme.tenant_id) == {owner: 1}
    # another tenant's user keeps theirs until they sign in again
    assert _rows(agentbus_db, "console_sign_in_links", globex.tenant_id) == {other: 1}
    assert _rows(agentbus_db, "console_sessions", globex.tenant_id) == {other: 1}
