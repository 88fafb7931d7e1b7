"""The ``agentbus-gateway`` command: migrate, schema doc, partitions, and ``admin``."""

from __future__ import annotations

import asyncio
import sys
from typing import Annotated

import psycopg
import typer
from platformkit.db.migrator import MigrationError
from rich.console import Console

from agentbus import admin_cli, db
from agentbus.settings import Settings

app = typer.Typer(help="AgentBus gateway.", no_args_is_help=True)
console = Console()
SCHEMA_DOC_TITLE = "AgentBus database schema"

DatabaseUrl = Annotated[
    str | None,
    typer.Option(
        help="Administrative URL of the agentbus database (default: the embedded server).",
        envvar="AGENTBUS_DATABASE_URL",
        show_default=False,
    ),
]


def _secret(value: object) -> str | None:
    get = getattr(value, "get_secret_value", None)
    return None if get is None else str(get())


@app.command()
def migrate(database_url: DatabaseUrl = None) -> None:
    """Create the roles and apply pending migrations (absurd, then AgentBus) as agentbus_owner."""
    url = db.resolve_admin_url(database_url)
    migrator = db.migrator(
        _secret(Settings().app_password),
        on_progress=lambda label: console.print(f"applying {label}"),
    )
    try:
        with console.status("migrating the agentbus database"):
            applied = asyncio.run(migrator.migrate(url))
    except MigrationError as exc:
        console.print(f"[red]migration failed[/]: {exc}")
        raise typer.Exit(1) from exc
    console.print(f"[green]up to date[/] ({len(applied)} applied)")


@app.command("schema-doc")
def schema_doc(database_url: DatabaseUrl = None) -> None:
    """Print docs/agentbus/schema.md as generated from the live catalog."""
    from platformkit.db.schemadoc import render

    with psycopg.connect(db.resolve_admin_url(database_url)) as conn:
        sys.stdout.write(render(conn, ["public"], SCHEMA_DOC_TITLE))


partitions = typer.Typer(help="Monthly partitions of messages.", no_args_is_help=True)
app.add_typer(partitions, name="partitions")


@partitions.command("ensure")
def partitions_ensure(
    database_url: DatabaseUrl = None,
    months_ahead: Annotated[
        int, typer.Option(min=0, max=36, help="Months to keep ahead of the current one.")
    ] = 3,
) -> None:
    """Create the missing messages_YYYY_MM partitions up to MONTHS_AHEAD months ahead."""
    from agentbus.controllers.partitions import ensure_partitions, existing_partitions

    async def run() -> tuple[list[str], list[str]]:
        url = db.resolve_admin_url(database_url)
        async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
            created = await ensure_partitions(conn, months_ahead=months_ahead)
            return created, await existing_partitions(conn)

    created, existing = asyncio.run(run())
    for name in created:
        console.print(f"created {name}")
    console.print(f"[green]partitions ready[/]: {', '.join(existing)}")


app.add_typer(admin_cli.app, name="admin")


def main() -> None:
    app()


if __name__ == "__main__":
    main()
