"""``agentbus-gateway support``: what support staff read of a tenant, logged in as
``agentbus_support``, inside the tenant's open consent window and audited (AB-4005 without
one). ``AGENTBUS_SUPPORT_PASSWORD`` is that role's password where the database asks for one."""

from __future__ import annotations

import asyncio
import json
from typing import Annotated, Any

import psycopg
import typer
from platformkit.cli import SERVER_FAILURES
from platformkit.db.pool import open_pool
from wirekit.clierrors import fail

from agentbus import db
from agentbus.admin_cli import TenantOpt, _id, public
from agentbus.errors import AgentBusError
from agentbus.support_console import VIEWS, support_read

app = typer.Typer(
    help="Support staff's reads of a tenant, under its consent.", no_args_is_help=True
)


@app.command("read")
def read(
    tenant: TenantOpt,
    staff: Annotated[
        str, typer.Option(help="Who is reading (recorded in the tenant's audit log).")
    ],
    what: Annotated[str, typer.Argument(help=f"One of: {', '.join(sorted(VIEWS))}.")],
    limit: Annotated[int, typer.Option(min=1, max=500)] = 50,
    database_url: Annotated[
        str | None,
        typer.Option(
            help="Administrative URL of the agentbus database.",
            envvar="AGENTBUS_DATABASE_URL",
            show_default=False,
        ),
    ] = None,
    password: Annotated[
        str | None, typer.Option(envvar="AGENTBUS_SUPPORT_PASSWORD", hidden=True)
    ] = None,
) -> None:
    """List a tenant's rows as support (metadata only; never payloads)."""
    tid = _id("ten", tenant, "--tenant")

    async def go() -> list[dict[str, Any]]:
        url = db.support_url(db.resolve_admin_url(database_url), password)
        pool = await open_pool(url, min_size=1, max_size=1, name="agentbus-support")
        try:
            return await support_read(pool, tid, staff, what, limit=limit)
        finally:
            await pool.close()

    try:
        rows = asyncio.run(go())
    except (AgentBusError, psycopg.OperationalError) as exc:
        fail(exc, SERVER_FAILURES)
    typer.echo(json.dumps([public(r, "") for r in rows], indent=2, default=str))
