"""The ``strataplane`` command: migrate, serve, the schema document, admins, audit checks."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from platformkit.cli import Console, fail
from platformkit.cli import run as run_cli
from platformkit.http.proxy_front import upstream_host
from rich.markup import escape

from strataplane import cli_spec, db
from strataplane.agents.settings import FleetSettings, default_agent_url
from strataplane.cli_audit_sinks import register as register_audit_sinks
from strataplane.cli_delivery import register as register_delivery
from strataplane.cli_fleet import register as register_fleet
from strataplane.cli_people import register as register_people
from strataplane.cli_secrets import register as register_secrets
from strataplane.settings import Settings

if TYPE_CHECKING:
    from platformkit.http.tls_front import TlsFrontConfig

app = typer.Typer(
    help="strataplane: a control plane for telemetry agent fleets.", no_args_is_help=True
)
console = Console(stderr=True, soft_wrap=True)
register_fleet(app)  # explain, simulate telegraf, bench fleet
register_delivery(app)  # rollouts, pins, catalog
register_people(app)  # teams, members, bindings, enrollment tokens, agents
register_secrets(app)  # secrets, the keyring and trust anchors
register_audit_sinks(app)
DatabaseUrl = Annotated[
    str | None,
    typer.Option(
        help="Administrative URL (default: the embedded server).", envvar="STRATAPLANE_DATABASE_URL"
    ),
]


def _app_password() -> str | None:
    secret = Settings().database_app_password
    return secret.get_secret_value() if secret is not None else None


def _migrate(admin_url: str) -> list[str]:
    migrator = db.migrator(
        _app_password(), on_progress=lambda label: console.print(f"applying {label}")
    )
    return asyncio.run(migrator.migrate(admin_url))


@app.command()
def migrate(database_url: DatabaseUrl = None) -> None:
    """Create the roles and apply pending migrations (absurd's schema, then strataplane's)."""
    applied = _migrate(db.resolve_admin_url(database_url))
    console.print(f"[green]up to date[/] ({len(applied)} applied)")


def render_schema_doc(database_url: str) -> str:
    """docs/strataplane/schema.md as the live catalog describes it."""
    import psycopg
    from platformkit.db.schemadoc import render

    with psycopg.connect(database_url, options=f"-c search_path={db.SCHEMA}") as conn:
        return render(conn, [db.SCHEMA], "strataplane database schema")


@app.command("schema-doc")
def schema_doc(
    database_url: DatabaseUrl = None,
    output: Annotated[Path | None, typer.Option(help="Write here instead of stdout.")] = None,
) -> None:
    """Print (or write) the schema document generated from a migrated database."""
    text = render_schema_doc(db.resolve_admin_url(database_url))
    if output is None:
        sys.stdout.write(text)
    else:
        output.write_text(text, encoding="utf-8")
        console.print(f"wrote {output}")


@app.command()
def serve(
    host: Annotated[str | None, typer.Option(help="Listen address (default: 127.0.0.1).")] = None,
    port: Annotated[int | None, typer.Option(help="Listen port (default: 7800).")] = None,
    workers: Annotated[int | None, typer.Option(help="Worker processes (default: 1).")] = None,
    agent_url: Annotated[
        str | None,
        typer.Option(
            help="The URL agents reach this server at (default: http://HOST:PORT, the "
            "machine's name when HOST is a wildcard).",
            envvar="STRATAPLANE_FLEET_AGENT_URL",
        ),
    ] = None,
    agent_proxy_listen: Annotated[
        str | None,
        typer.Option(
            help="Also accept agents at HOST:PORT behind a PROXY-protocol load balancer "
            "(v1 or v2, only from STRATAPLANE_FLEET_PROXY_FROM).",
            envvar="STRATAPLANE_FLEET_PROXY_PROTOCOL_LISTEN",
        ),
    ] = None,
    agent_tls_listen: Annotated[
        str | None,
        typer.Option(
            help="Also accept agents over TLS at HOST:PORT (certificate and key from "
            "STRATAPLANE_FLEET_TLS_CERT and STRATAPLANE_FLEET_TLS_KEY; client certificates of "
            "the CAs in STRATAPLANE_FLEET_TLS_CLIENT_CA, for trust anchors).",
            envvar="STRATAPLANE_FLEET_TLS_LISTEN",
        ),
    ] = None,
) -> None:
    """Migrate, then serve the API (embedded PostgreSQL unless STRATAPLANE_DATABASE_URL)."""
    from platformkit.http import serve as run

    overrides = {
        k: v for k, v in {"host": host, "port": port, "workers": workers}.items() if v is not None
    }
    settings = Settings(**overrides)  # type: ignore[arg-type]
    configured = settings.database_url.get_secret_value() if settings.database_url else None
    admin_url = db.resolve_admin_url(
        configured, lambda line: console.print(line, markup=False, soft_wrap=True)
    )
    _migrate(admin_url)
    # The workers build their settings from the environment: pass the resolved values on.
    os.environ["STRATAPLANE_DATABASE_URL"] = admin_url
    for key, value in overrides.items():
        os.environ[f"STRATAPLANE_{key.upper()}"] = str(value)
    reached = agent_url or default_agent_url(settings.host, settings.port)
    os.environ["STRATAPLANE_FLEET_AGENT_URL"] = reached
    front = proxy_front(agent_proxy_listen, settings.host) if agent_proxy_listen else None
    tls = tls_front(agent_tls_listen, settings.host) if agent_tls_listen else None
    base = f"http://{settings.host}:{settings.port}"
    console.print(f"[green]strataplane[/] console on {base}/  (API docs: {base}/api/v1/docs)")
    console.print(f"agents reach it at {reached}", markup=False)
    if front is not None:
        console.print(f"agents behind a PROXY-protocol balancer: {agent_proxy_listen}")
    if tls is not None:
        console.print(f"agents over TLS: {agent_tls_listen}")
    raise typer.Exit(
        run(
            "strataplane.app:create_app",
            settings.host,
            settings.port,
            settings.workers,
            factory=True,
            backlog=settings.backlog,
            backpressure=settings.backpressure,
            proxy_listen=front[0] if front else None,
            proxy_trusted=front[1] if front else (),
            tls_front=tls,
        )
    )


def proxy_front(listen: str, host: str) -> tuple[tuple[str, int], list[str]]:
    """Where the PROXY-protocol front listens and whom it trusts; the workers are told to trust
    the front's own address for X-Forwarded-For (set in the environment they read)."""
    trusted = FleetSettings().proxy_from
    if not trusted:
        raise typer.BadParameter(
            "set STRATAPLANE_FLEET_PROXY_FROM to the load balancers' networks first",
            param_hint="--agent-proxy-listen",
        )
    bind, _, port = listen.rpartition(":")
    if not port.isdigit():
        raise typer.BadParameter("expected HOST:PORT", param_hint="--agent-proxy-listen")
    os.environ["STRATAPLANE_FLEET_PROXY_FROM"] = json.dumps([*trusted, upstream_host(host)])
    return (bind.strip("[]") or "0.0.0.0", int(port)), trusted  # noqa: S104


def tls_front(listen: str, host: str) -> TlsFrontConfig:
    """The agents' TLS listener; the workers trust the front's address for its headers."""
    from platformkit.http.tls_front import TlsFrontConfig

    cert, key = (
        os.environ.get("STRATAPLANE_FLEET_TLS_CERT"),
        os.environ.get("STRATAPLANE_FLEET_TLS_KEY"),
    )
    if not cert or not key:
        raise typer.BadParameter(
            "set STRATAPLANE_FLEET_TLS_CERT and STRATAPLANE_FLEET_TLS_KEY first",
            param_hint="--agent-tls-listen",
        )
    bind, _, port = listen.rpartition(":")
    if not port.isdigit():
        raise typer.BadParameter("expected HOST:PORT", param_hint="--agent-tls-listen")
    trusted = FleetSettings().proxy_from
    os.environ["STRATAPLANE_FLEET_PROXY_FROM"] = json.dumps([*trusted, upstream_host(host)])
    client_ca = os.environ.get("STRATAPLANE_FLEET_TLS_CLIENT_CA") or None
    where = (bind.strip("[]") or "0.0.0.0", int(port))  # noqa: S104
    return TlsFrontConfig(where, (upstream_host(host), 0), cert, key, client_ca)


@app.command("create-admin")
def create_admin(
    username: Annotated[str, typer.Option(help="Local username of the platform admin.")],
    password: Annotated[
        str, typer.Option(prompt=True, hide_input=True, envvar="STRATAPLANE_ADMIN_PASSWORD")
    ],
    display_name: Annotated[str | None, typer.Option(help="(default: the username)")] = None,
    database_url: DatabaseUrl = None,
) -> None:
    """Create a local platform admin (who then logs in and creates tenants).

    The password must meet the sign-in policy: at least 12 characters, not one of the most
    common passwords, not the username."""
    from strataplane import errors
    from strataplane.actions.admin import create_platform_admin
    from strataplane.actions.users import check_new_password_of

    try:
        check_new_password_of(username, None, password)
    except errors.WeakPassword as exc:
        fail(exc)
    user_id = asyncio.run(
        create_platform_admin(
            db.resolve_admin_url(database_url), username, display_name or username, password
        )
    )
    console.print(f"[green]platform admin[/] {escape(username)} ({user_id})")


@app.command("restore-admin")
def restore_admin(
    tenant: Annotated[str, typer.Option(help="The tenant (id or slug).")],
    username: Annotated[str, typer.Option(help="Local username to make its admin.")],
    database_url: DatabaseUrl = None,
) -> None:
    """Make a local user an admin of a tenant again (audited), for a tenant left without one."""
    from strataplane.actions.admin import restore_tenant_admin

    changed = asyncio.run(
        restore_tenant_admin(db.resolve_admin_url(database_url), tenant, username)
    )
    state = "is now" if changed else "already was"
    console.print(f"[green]{escape(username)}[/] {state} an admin of {escape(tenant)}")


audit_app = typer.Typer(help="The audit chains.", no_args_is_help=True)
app.add_typer(audit_app, name="audit")
app.command("login")(cli_spec.login)
app.add_typer(cli_spec.cs_app, name="cs")
app.add_typer(cli_spec.spec_app, name="spec")


@audit_app.command("verify")
def audit_verify(
    tenant: Annotated[str | None, typer.Option(help="Only this tenant (id or slug).")] = None,
    platform: Annotated[bool, typer.Option(help="Only the platform chain.")] = False,
    database_url: DatabaseUrl = None,
) -> None:
    """Walk the chains; name the first bad row of each broken one (exit 1)."""
    from strataplane.actions.admin import verify_chains

    checks = asyncio.run(verify_chains(db.resolve_admin_url(database_url), tenant, platform))
    for check in checks:
        if check.ok:
            console.print(f"[green]ok[/] {check.chain} ({check.checked} events)")
        else:
            what = "id" if check.chain.endswith("/platform") else "seq"
            console.print(
                f"[red]broken[/] {check.chain} at {what} {check.bad_row}: "
                f"{check.reason} ({check.detail}); the {check.checked} events before it verify"
            )
    if not all(check.ok for check in checks):
        raise typer.Exit(1)


@audit_app.command("ship")
def audit_ship(
    bucket: Annotated[
        str,
        typer.Argument(
            help="Where the events go: s3://BUCKET/PREFIX (credentials and endpoint from "
            "AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_REGION, AWS_ENDPOINT_URL)."
        ),
    ],
    tenant: Annotated[
        list[str] | None, typer.Option(help="Only this tenant (id or slug); repeatable.")
    ] = None,
    batch: Annotated[int, typer.Option(help="Events per object.", min=1, max=100_000)] = 1000,
    follow: Annotated[
        float | None,
        typer.Option(help="Keep shipping, a pass every this many seconds.", min=1),
    ] = None,
    database_url: DatabaseUrl = None,
) -> None:
    """Copy the tenants' audit chains to an object store as JSON Lines.

    Each run goes on after what the bucket already holds and prints each tenant's progress
    and backlog as JSON; it exits 1 if one failed."""
    from strataplane.actions.admin import ship_audit
    from strataplane.controllers.audit_bucket import TenantShipped

    def report(done: list[TenantShipped]) -> None:
        for shipped in done:
            print(json.dumps(shipped.as_json()), flush=True)

    done = asyncio.run(
        ship_audit(
            db.resolve_admin_url(database_url),
            bucket,
            tenant or [],
            batch=batch,
            follow=follow,
            report=report,
        )
    )
    if any(d.error for d in done):
        raise typer.Exit(1)


def stack_command() -> list[str]:
    """How ``stack up`` starts strataplane."""
    return [sys.executable, "-m", "strataplane.cli", "serve"]


def main() -> None:
    run_cli(app)


if __name__ == "__main__":
    main()
