"""The gateway's database: where it is, how it is migrated, and the scope of its transactions.

Database ``agentbus``; migrations run as ``agentbus_owner``; the gateway logs in as
``agentbus_app`` (NOBYPASSRLS) and sets ``app.tenant_id`` right after BEGIN through
``tenant_transaction(pool, SCOPE, tenant_id)``; the support console logs in as
``agentbus_support``. absurd's schema comes first, then ours (which creates the ``agentbus``
queue). Hot paths use ``pipelined_transaction``, the same scope in psycopg's pipeline mode.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager, suppress
from importlib.resources import files

import psycopg
from platformkit.db.migrator import Migrator, load_directory
from platformkit.db.pool import open_pool, with_user
from platformkit.db.roles import RoleSpec
from platformkit.db.scope import Conn, Pool, ScopeSettings
from platformkit.db.server import admin_url_for
from platformkit.jobs import absurd_source

DATABASE = "agentbus"
OWNER_ROLE = "agentbus_owner"
APP_ROLE = "agentbus_app"
SUPPORT_ROLE = "agentbus_support"
QUEUE = "agentbus"
SCOPE = ScopeSettings(tenant="app.tenant_id")
EXTENSIONS = ("btree_gist",)


def migrator(
    app_password: str | None = None, on_progress: Callable[[str], None] | None = None
) -> Migrator:
    """absurd, then AgentBus's own files, applied as agentbus_owner under an advisory lock."""
    roles = RoleSpec(
        owner=OWNER_ROLE,
        app=APP_ROLE,
        app_password=app_password,
        extra_login_roles=(SUPPORT_ROLE,),
    )
    return Migrator(
        system="agentbus",
        sources=[absurd_source(), load_directory("agentbus", files("agentbus") / "migrations")],
        roles=roles,
        extensions=EXTENSIONS,
        on_progress=on_progress or (lambda _label: None),
    )


def resolve_admin_url(configured: str | None, say: Callable[[str], None] | None = None) -> str:
    """The configured administrative URL, or the embedded server's ``agentbus`` database."""
    return admin_url_for(configured, DATABASE, say)


def app_url(admin_url: str, app_password: str | None = None) -> str:
    """The same database, logged in as the non-superuser application role."""
    return with_user(admin_url, APP_ROLE, app_password)


def support_url(admin_url: str, password: str | None = None) -> str:
    return with_user(admin_url, SUPPORT_ROLE, password)


CONNECTION_WAIT_S = 5.0
"""How long a request waits for a pooled connection: past it (PostgreSQL away, or every
connection busy) the request is answered AB-9002 and the sidecar retries it later."""


async def open_app_pool(
    admin_url: str, app_password: str | None = None, *, max_size: int = 10
) -> Pool:
    return await open_pool(
        app_url(admin_url, app_password), min_size=1, max_size=max_size, name="agentbus-app",
        wait_timeout=CONNECTION_WAIT_S,
    )  # fmt: skip


# The tenant, and generic plans for the transaction's prepared statements. The hot paths reach
# messages one key at a time by index (``delivery.store``), so a plan made for no values in
# particular is as good as one made for each execution; but with custom plans, PostgreSQL's
# default for statements whose partitions it can prune at planning, it plans every execution
# again: 0.3 to 0.6 ms of its CPU per statement, more than running it. docs/agentbus/
# testing.md has the measurements; test_delivery_plans checks the generic plans too.
_HOT_PATH_SETTINGS = """SELECT set_config(%s, %s, true),
                               set_config('plan_cache_mode', 'force_generic_plan', true)"""


@asynccontextmanager
async def pipelined_transaction(pool: Pool, tenant_id: uuid.UUID) -> AsyncIterator[Conn]:
    """``tenant_transaction(pool, SCOPE, tenant_id)`` in pipeline mode: BEGIN, the tenant
    setting, the body's statements and COMMIT are sent together, and the client waits for the
    server only where the body fetches a result, and once at the end. A body that fetches
    nothing costs one round trip. Its prepared statements run with generic plans.

    In pipeline mode an error surfaces at the next fetch or at the end of the block, and a
    cursor's ``rowcount`` is known only once its result was fetched: bodies learn outcomes
    with ``fetch*`` (``RETURNING``), never from ``rowcount``.

    BEGIN and COMMIT are statements of the pipeline, not psycopg's ``transaction()``: inside a
    pipeline that opens two nested pipelines, and each one's end waits for the server, so a
    transaction cost three round trips more than its body needed. A savepoint in the body must
    be a ``SAVEPOINT`` statement too: psycopg learns that BEGIN opened a transaction only at a
    sync, so its ``transaction()`` would begin and commit one of its own. On an error the
    block's transaction is rolled back before the error goes on."""
    if not isinstance(tenant_id, uuid.UUID):
        raise TypeError("tenant_id must be a UUID")
    async with pool.connection() as conn:
        try:
            async with conn.pipeline():
                await conn.execute("BEGIN")
                await conn.execute(_HOT_PATH_SETTINGS, (SCOPE.tenant, str(tenant_id)))
                yield conn
                await conn.execute("COMMIT")
        except BaseException:
            with suppress(psycopg.Error):  # a broken connection: the pool drops it
                await conn.rollback()
            raise
