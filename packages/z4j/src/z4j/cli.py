"""The ``z4j`` command: serve the brain, migrate a database, run benchmarks."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import Coroutine
from typing import Annotated, Any

import typer
from platformkit.cli import CliError, Console, fail
from platformkit.cli import run as run_cli
from rich.markup import escape

from z4j import db
from z4j.alerts_cli import app as alerts_app
from z4j.cli_commands import queue_app, task_app, worker_app
from z4j.cli_schedules import schedule_app
from z4j.secrets_file import load_or_create
from z4j.settings import Settings
from z4j.users_cli import app as users_app

app = typer.Typer(
    help="z4j brain: durable history and a live dashboard for Celery.", no_args_is_help=True
)
console = Console()
app.add_typer(task_app, name="task")
app.add_typer(queue_app, name="queue")
app.add_typer(worker_app, name="worker")
app.add_typer(schedule_app, name="schedule")


@app.command()
def migrate(
    database_url: Annotated[
        str,
        typer.Option(help="Administrative URL of an existing database.", envvar="Z4J_DATABASE_URL"),
    ],
) -> None:
    """Apply the brain's migrations to an existing database."""
    settings = Settings()
    brain_secrets, _ = load_or_create(settings.config_dir)
    migrator = db.migrator(
        brain_secrets, on_progress=lambda label: console.print(f"applying {label}")
    )
    applied = asyncio.run(migrator.migrate(database_url))
    console.print(f"[green]up to date[/] ({len(applied)} applied)")


@app.command()
def serve(
    host: Annotated[str | None, typer.Option(help="Listen address (default: 127.0.0.1).")] = None,
    port: Annotated[int | None, typer.Option(help="Listen port (default: 7700).")] = None,
    workers: Annotated[int | None, typer.Option(help="Worker processes (default: 1).")] = None,
    admin_email: Annotated[
        str | None, typer.Option(help="Create this first admin.", envvar="Z4J_ADMIN_EMAIL")
    ] = None,
    admin_password: Annotated[
        str | None,
        typer.Option(
            help="Password of the first admin (or Z4J_ADMIN_PASSWORD).", envvar="Z4J_ADMIN_PASSWORD"
        ),
    ] = None,
) -> None:
    """Start the brain (embedded PostgreSQL unless Z4J_DATABASE_URL is set)."""
    from platformkit.http import serve as run

    from z4j.actions.errors import InvalidInput
    from z4j.actions.users import check_credentials_shape
    from z4j.first_run import first_run

    if admin_email and admin_password:
        try:
            check_credentials_shape(admin_email, admin_password)
        except InvalidInput as exc:
            fail(exc)
    overrides = {
        k: v for k, v in {"host": host, "port": port, "workers": workers}.items() if v is not None
    }
    settings = Settings(**overrides)  # type: ignore[arg-type]
    admin_url = asyncio.run(first_run(settings, admin_email, admin_password, console))
    # Worker processes read settings from the environment; pass the resolved database on.
    os.environ["Z4J_DATABASE_URL"] = admin_url
    for key, value in overrides.items():
        os.environ[f"Z4J_{key.upper()}"] = str(value)
    console.print(
        f"[green]z4j brain[/] on {settings.base_url}  (agents: "
        f"{settings.base_url.replace('http', 'ws', 1)}/ws/agent)"
    )
    raise typer.Exit(
        run("z4j.app:create_app", settings.host, settings.port, settings.workers, factory=True)
    )


@app.command("schema-doc")
def schema_doc(
    database_url: Annotated[
        str, typer.Option(help="A migrated z4j database.", envvar="Z4J_DATABASE_URL")
    ],
) -> None:
    """Print docs/z4j/schema.md as generated from the live catalog."""
    import psycopg
    from platformkit.db.schemadoc import render

    with psycopg.connect(database_url) as conn:
        sys.stdout.write(render(conn, ["public"], "z4j database schema"))


bench = typer.Typer(help="Benchmarks; each prints one JSON object per line.")
app.add_typer(bench, name="bench")


def _print_lines(results: Coroutine[Any, Any, list[dict[str, Any]]]) -> None:
    """Run a benchmark and print each of its results as one JSON line."""
    for result in asyncio.run(results):
        print(json.dumps(result))


@bench.command("ingest")
def bench_ingest(
    events: Annotated[int, typer.Option(help="Events to send.")] = 200_000,
    batch: Annotated[int, typer.Option(help="Events per signed frame.")] = 500,
    connections: Annotated[int, typer.Option(help="Concurrent agent connections.")] = 4,
    workers: Annotated[int, typer.Option(help="Brain worker processes.")] = 1,
    database_url: Annotated[
        str | None, typer.Option(envvar="Z4J_DATABASE_URL", help="Server to use; default embedded.")
    ] = None,
    purge_history: Annotated[
        int,
        typer.Option(
            help="Also run with this many expired events seeded, purged by the retention "
            "controller while ingesting (two JSON lines: without, then with)."
        ),
    ] = 0,
) -> None:
    """Signed event batches over WebSockets into PostgreSQL: events/s and batch latency."""
    from z4j.bench.ingest import run

    _print_lines(run(events, batch, connections, workers, database_url, purge_history))


app.add_typer(users_app, name="users")
app.add_typer(alerts_app, name="alerts")
audit_app = typer.Typer(help="The audit log.", no_args_is_help=True)
app.add_typer(audit_app, name="audit")


@audit_app.command("verify")
def audit_verify(
    database_url: Annotated[
        str | None,
        typer.Option(
            help="Administrative URL (default: the embedded server).", envvar="Z4J_DATABASE_URL"
        ),
    ] = None,
) -> None:
    """Check the audit log's HMAC chain; name the first row that breaks it (exit 1)."""
    from z4j.actions.audit import verify_database
    from z4j.secrets_file import FILE_NAME

    settings = Settings()
    if not (settings.config_dir / FILE_NAME).exists():
        raise CliError(
            "config.no_secrets",
            f"no secrets in {settings.config_dir}: the chain key is derived from them; "
            "point Z4J_CONFIG_DIR at the brain's config dir",
            exit_code=2,
        )
    brain_secrets, _ = load_or_create(settings.config_dir)
    result = asyncio.run(
        verify_database(db.resolve_admin_url(database_url), brain_secrets.audit_key)
    )
    if result.ok:
        console.print(f"[green]audit log intact[/] ({result.checked} rows)")
        return
    console.print(
        f"[red]audit log broken[/] at row {result.bad_id} ({escape(str(result.reason))}): "
        f"{escape(str(result.detail))}; {result.checked} rows before it verified"
    )
    raise typer.Exit(1)


@bench.command("query")
def bench_query(
    tasks: Annotated[int, typer.Option(help="Tasks to load into one project.")] = 1_000_000,
    requests: Annotated[int, typer.Option(help="Requests per filter case.")] = 100,
    database_url: Annotated[
        str | None, typer.Option(envvar="Z4J_DATABASE_URL", help="Server; default embedded.")
    ] = None,
) -> None:
    """The task-list API with typical filters over N tasks: p50/p95/p99 per case."""
    from z4j.bench.query import run

    _print_lines(run(tasks, requests, database_url))


@bench.command("trends")
def bench_trends(
    tasks: Annotated[
        int, typer.Option(help="Finished tasks to load into one project.")
    ] = 1_000_000,
    requests: Annotated[int, typer.Option(help="Requests per window case.")] = 20,
    database_url: Annotated[
        str | None, typer.Option(envvar="Z4J_DATABASE_URL", help="Server; default embedded.")
    ] = None,
) -> None:
    """The trends API per window over N tasks, with and without its index: JSON."""
    from z4j.bench.trends import run

    _print_lines(run(tasks, requests, database_url))


@bench.command("audit")
def bench_audit(
    rows: Annotated[int, typer.Option(help="Audit rows to load.")] = 1_000_000,
    requests: Annotated[int, typer.Option(help="Requests per filter case.")] = 50,
    database_url: Annotated[
        str | None, typer.Option(envvar="Z4J_DATABASE_URL", help="Server; default embedded.")
    ] = None,
) -> None:
    """Audit log pages with typical filters over N rows, then one whole export: JSON."""
    from z4j.bench.audit import run

    _print_lines(run(rows, requests, database_url))


def stack_command() -> list[str]:
    """How ``stack up`` starts the brain."""
    return [sys.executable, "-m", "z4j.cli", "serve"]


def main() -> None:
    run_cli(app)


if __name__ == "__main__":
    main()
