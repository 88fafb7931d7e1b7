"""The ``agentbus-gateway`` command: serve, migrate, schema doc, partitions, ``admin``,
``audit``, ``keys`` and ``support``."""

from __future__ import annotations

import asyncio
import sys
from typing import Annotated, Any

import psycopg
import typer
from platformkit.cli import Console
from platformkit.cli import run as run_cli
from wirekit.clierrors import CliError

from agentbus import admin_cli, cli_audit, cli_keys, cli_support, db
from agentbus.policies import cli as policies_cli
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
def serve(
    host: Annotated[str | None, typer.Option(help="Listen address (default: 127.0.0.1).")] = None,
    port: Annotated[int | None, typer.Option(help="HTTP port (default: 7900).")] = None,
    workers: Annotated[int | None, typer.Option(help="Worker processes (default: 1).")] = None,
    database_url: DatabaseUrl = None,
) -> None:
    """Run the gateway.

    On the embedded PostgreSQL and NATS unless AGENTBUS_DATABASE_URL and AGENTBUS_NATS_URL name
    servers."""
    from agentbus.gateway.actions.signing import KeyringMismatch
    from agentbus.gateway.config import GatewaySettings
    from agentbus.serve import serve as run

    given = {"host": host, "port": port, "workers": workers, "database_url": database_url}
    settings = GatewaySettings(**{k: v for k, v in given.items() if v is not None})  # type: ignore[arg-type]  # pydantic-settings takes field names as keywords
    try:
        status = run(settings, lambda line: console.print(line, markup=False, soft_wrap=True))
    except KeyringMismatch as exc:
        raise CliError(exc.code, f"cannot start: {exc}") from exc
    raise typer.Exit(status)


@app.command()
def bench(
    messages: Annotated[int, typer.Option(min=1, help="Messages per run.")] = 2000,
    rate: Annotated[float, typer.Option(min=1, help="Paced run: messages per second.")] = 500,
    workers: Annotated[int, typer.Option(min=1, help="Gateway worker processes.")] = 1,
    lanes: Annotated[
        int, typer.Option(min=1, help="Sending and receiving agent pairs, each its own lane.")
    ] = 1,
    warmup: Annotated[int, typer.Option(min=0, help="Unmeasured messages first.")] = 200,
    lone_rounds: Annotated[
        int,
        typer.Option(
            min=0, help="Messages sent one at a time first, for each request's CPU per service."
        ),
    ] = 0,
    raw: Annotated[bool, typer.Option(help="Also run raw NATS JetStream as the ceiling.")] = True,
    delivery: Annotated[
        str,
        typer.Option(
            help="How the receiving clients get messages: long-poll, or websocket (the "
            "delivery WebSocket, as agentbus sidecar run does by default)."
        ),
    ] = "long-poll",
    sends: Annotated[
        str | None,
        typer.Option(
            help="How the sending clients send: http (POST /v1/messages/batch), or websocket "
            "(send frames on the sender's delivery WebSocket, as agentbus sidecar run does); "
            "websocket needs --delivery websocket. Default: websocket with --delivery "
            "websocket, else http.",
            show_default=False,
        ),
    ] = None,
    inline_payloads: Annotated[
        bool,
        typer.Option(
            help="Run the gateway with AGENTBUS_INLINE_PAYLOADS: small payloads travel sealed "
            "in their JetStream copy, and deliveries read no object."
        ),
    ] = False,
    analytics: Annotated[
        bool,
        typer.Option(
            help="Run the gateway with analytics (the outbox triggers and chDB ingest); run "
            "once with and once without for the CPU analytics adds per message."
        ),
    ] = True,
    policies: Annotated[
        str,
        typer.Option(
            help="The tenant's policy set: default (allow all, no Cedar call), or realistic "
            "(six forbids beside the default, a full Cedar decision per send and read)."
        ),
    ] = "default",
    database_url: Annotated[
        str | None,
        typer.Option(
            help="A PostgreSQL server to create the bench database in (default: a "
            "throwaway embedded one).",
            show_default=False,
        ),
    ] = None,
    nats_url: Annotated[
        str | None,
        typer.Option(
            help="NATS with JetStream (default: a throwaway embedded one).", show_default=False
        ),
    ] = None,
) -> None:
    """End-to-end latency and throughput of a gateway process, beside raw JetStream.

    Send -> NATS -> delivery -> application ack, paced and unpaced; one JSON object per line."""
    from agentbus_sidecar.sync import DELIVERIES

    from agentbus.bench.command import bench as run
    from agentbus.bench.runs import sends_for

    if delivery not in DELIVERIES:
        hint = f"one of {', '.join(sorted(DELIVERIES))}"
        raise typer.BadParameter(hint, param_hint="--delivery")
    try:
        sends_for(delivery, sends)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--sends") from None
    run(messages, rate, database_url=database_url, nats_url=nats_url, workers=workers,
        lanes=lanes, warmup=warmup, raw=raw, lone=lone_rounds, delivery=delivery,
        inline_payloads=inline_payloads, analytics=analytics,
        policies=policies, sends=sends)  # fmt: skip


@app.command("bench-analytics")
def bench_analytics(
    events: Annotated[int, typer.Option(min=1, help="Events written, then drained.")] = 100_000,
    batch: Annotated[int, typer.Option(min=1, help="Rows per ClickHouse insert.")] = 10_000,
    database_url: Annotated[
        str | None,
        typer.Option(
            help="A PostgreSQL server to create the bench database in (default: a "
            "throwaway embedded one).",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Analytics ingest: events -> chDB events per second and CPU per event; JSON lines."""
    from agentbus.bench.analytics import bench_analytics as run

    run(events, batch, database_url)


def stack_command() -> list[str]:
    """How ``stack up`` starts the gateway."""
    return [sys.executable, "-m", "agentbus.cli", "serve"]


@app.command()
def migrate(database_url: DatabaseUrl = None) -> None:
    """Create the roles and apply pending migrations (absurd, then AgentBus) as agentbus_owner."""
    url = db.resolve_admin_url(database_url)
    migrator = db.migrator(
        _secret(Settings().app_password),
        on_progress=lambda label: console.print(f"applying {label}"),
    )
    with console.status("migrating the agentbus database"):
        applied = asyncio.run(migrator.migrate(url))
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


@app.command("retention")
def retention_run(database_url: DatabaseUrl = None) -> None:
    """Run the retention jobs once.

    Delete messages past their tenant's retention (with their delivery state, receipts and
    payloads), then drop emptied partitions past the longest."""
    from agentbus.controllers.retention import Retention, drop_partitions
    from agentbus.gateway.config import GatewaySettings
    from agentbus.gateway.store.objectstore import open_object_store

    settings = GatewaySettings()
    objects = open_object_store(
        settings.object_store_url, settings.objects_dir, settings.object_store_timeout_s
    )

    async def run() -> tuple[int, list[dict[str, Any]]]:
        pool = await db.open_app_pool(
            db.resolve_admin_url(database_url), _secret(Settings().app_password), max_size=2
        )
        try:
            return await Retention(pool, objects).run_once(), await drop_partitions(pool)
        finally:
            await pool.close()

    with console.status("deleting what is past retention"):
        deleted, partitions = asyncio.run(run())
    console.print(f"deleted {deleted} messages past retention")
    for row in partitions:
        verb = "dropped" if row["dropped"] else "kept (still holds rows)"
        console.print(f"{verb} {row['partition_name']}")


app.add_typer(admin_cli.app, name="admin")
app.add_typer(cli_audit.app, name="audit")
app.add_typer(cli_keys.app, name="keys")
app.add_typer(cli_support.app, name="support")
admin_cli.app.add_typer(policies_cli.app, name="policies")


def main() -> None:
    run_cli(app)


if __name__ == "__main__":
    main()
