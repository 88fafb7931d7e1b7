"""``agentbus-gateway admin``: the platform operator's tenants, workspaces, users and tokens, and
a tenant's audit log.

Every command calls the same action the API calls, as a platform actor (``cli:<login>`` in
``audit_actions``), logged in as agentbus_app so row-level security applies as in the gateway.
Ids are the text forms (``ten_...``); ``--json`` prints machine-readable lists.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Annotated, Any

import psycopg
import typer
from platformkit.cli import SERVER_FAILURES, Console
from psycopg_pool import PoolTimeout
from rich.markup import escape
from rich.table import Table
from wirekit.clierrors import fail

from agentbus import db
from agentbus.actions import audit, tenants, tokens, users, workspaces
from agentbus.actions.context import Actor, Ctx
from agentbus.errors import AgentBusError
from agentbus.gateway.actions.signing import KeyringMismatch, check_keyring, wrapped_keys
from agentbus.ids import InvalidId, format_id, parse_id
from agentbus.keys import load_or_create_keyring
from agentbus.settings import Settings
from agentbus.store.integration_tokens import DEFAULT_SCOPES

app = typer.Typer(
    help="Administer tenants, workspaces, users and tokens; read the audit log.",
    no_args_is_help=True,
)
console = Console()
PREFIX_OF = {"tenant_id": "ten", "workspace_id": "ws", "owner_user_id": "usr", "user_id": "usr"}


@dataclass
class State:
    database_url: str | None
    keyring_path: Path | None


@app.callback()
def admin(
    ctx: typer.Context,
    database_url: Annotated[
        str | None,
        typer.Option(
            help="Administrative URL of the agentbus database (default: the embedded server).",
            envvar="AGENTBUS_DATABASE_URL",
            show_default=False,
        ),
    ] = None,
    keyring: Annotated[
        Path | None,
        typer.Option(
            help="Deployment keyring (default: <config dir>/keyring.json).",
            envvar="AGENTBUS_KEYRING_PATH",
            show_default=False,
        ),
    ] = None,
) -> None:
    ctx.obj = State(database_url, keyring)


def _run[T](ctx: typer.Context, call: Callable[[Ctx], Awaitable[T]], *, keyring: bool = False) -> T:
    state: State = ctx.ensure_object(State)
    settings = Settings()
    password = settings.app_password.get_secret_value() if settings.app_password else None

    async def go() -> T:
        pool = await db.open_app_pool(
            db.resolve_admin_url(state.database_url), password, max_size=2
        )
        try:
            ring = None
            if keyring:
                path = state.keyring_path or settings.resolved_keyring_path
                async with pool.connection() as conn:
                    check_keyring(await wrapped_keys(conn), path)
                ring = load_or_create_keyring(path)
            return await call(Ctx(pool, Actor.operator(), keyring=ring))
        finally:
            await pool.close()

    try:
        return asyncio.run(go())
    except (AgentBusError, KeyringMismatch, psycopg.OperationalError, PoolTimeout) as exc:
        fail(exc, {**SERVER_FAILURES, PoolTimeout: "database.unavailable"})


def _id(prefix: str, text: str, option: str) -> uuid.UUID:
    try:
        return parse_id(prefix, text)
    except InvalidId as exc:
        raise typer.BadParameter(f"expected a {prefix}_ id", param_hint=option) from exc


def rfc3339(value: datetime) -> str:
    """The wire form of 00-CONVENTIONS §7: UTC, ``Z``, exactly three fractional digits."""
    return (
        value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.") + f"{value.microsecond // 1000:03d}Z"
    )


def public(row: dict[str, Any], prefix: str) -> dict[str, Any]:
    """A row for display: text ids, ISO timestamps."""
    out: dict[str, Any] = {}
    for key, value in row.items():
        kind = prefix if key == "id" else PREFIX_OF.get(key)
        if isinstance(value, uuid.UUID):
            value = format_id(kind, value) if kind else str(value)
        elif isinstance(value, datetime):
            value = rfc3339(value)
        out[key] = value
    return out


def _show(rows: list[dict[str, Any]], prefix: str, columns: list[str], as_json: bool) -> None:
    shown = [public(r, prefix) for r in rows]
    if as_json:
        typer.echo(json.dumps(shown, indent=2, default=str))
        return
    table = Table()
    for column in columns:
        table.add_column(column, no_wrap=column == "id")

    def cell(value: Any) -> str:  # names and emails are people's text: never Rich markup
        text = " ".join(value) if isinstance(value, list) else "" if value is None else str(value)
        return escape(text)

    for row in shown:
        table.add_row(*(cell(row[c]) for c in columns))
    console.print(table)


JsonFlag = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")]
TenantOpt = Annotated[str, typer.Option("--tenant", help="Tenant id (ten_...).")]

tenants_app = typer.Typer(help="Tenants.", no_args_is_help=True)
workspaces_app = typer.Typer(help="Workspaces of a tenant.", no_args_is_help=True)
users_app = typer.Typer(help="Users of a tenant.", no_args_is_help=True)
tokens_app = typer.Typer(help="Integration tokens of a tenant.", no_args_is_help=True)
app.add_typer(tenants_app, name="tenants")
app.add_typer(workspaces_app, name="workspaces")
app.add_typer(users_app, name="users")
app.add_typer(tokens_app, name="tokens")


@tenants_app.command("create")
def tenants_create(
    ctx: typer.Context,
    slug: Annotated[str, typer.Argument(help="3-40 of a-z, 0-9, '-'.")],
    name: Annotated[str, typer.Option(help="Display name.")],
    plan: Annotated[str, typer.Option(help="starter, business or enterprise.")] = "starter",
    region: Annotated[str, typer.Option(help="Data residency region.")] = "eu-west",
    owner_email: Annotated[str | None, typer.Option(help="Also create this owner.")] = None,
    owner_idp: Annotated[
        str, typer.Option(help="Owner's IdP ('oidc:<issuer>'...).")
    ] = "oidc:local",
    owner_subject: Annotated[
        str | None, typer.Option(help="Owner's IdP subject (default: e-mail).")
    ] = None,
) -> None:
    """Create a tenant; with --owner-email also its owner and a bootstrap token (shown once)."""
    owner = None
    if owner_email is not None:
        owner = users.OwnerSpec(owner_email, owner_idp, owner_subject or owner_email)
    created = _run(
        ctx,
        lambda c: tenants.create_tenant(
            c, slug=slug, display_name=name, plan=plan, region=region, owner=owner
        ),
        keyring=True,
    )
    console.print(f"created tenant {format_id('ten', created.tenant['id'])} ({slug})")
    if created.owner_user is not None:
        console.print(f"owner {format_id('usr', created.owner_user['id'])}")
    if created.bootstrap_token is not None:
        _print_token(created.bootstrap_token)


@tenants_app.command("list")
def tenants_list(ctx: typer.Context, as_json: JsonFlag = False) -> None:
    """Every tenant."""
    rows = _run(ctx, tenants.list_tenants)
    _show(rows, "ten", ["id", "slug", "display_name", "plan", "status", "region"], as_json)


TenantArg = Annotated[str, typer.Argument(help="Tenant id (ten_...).")]
ReasonOpt = Annotated[str | None, typer.Option(help="Recorded in the audit row.")]


@tenants_app.command("suspend")
def tenants_suspend(ctx: typer.Context, tenant: TenantArg, reason: ReasonOpt = None) -> None:
    """Suspend an active tenant: its tokens stop working (AB-1013)."""
    tid = _id("ten", tenant, "TENANT")
    _run(ctx, lambda c: tenants.suspend_tenant(c, tid, reason=reason))
    console.print(f"suspended {tenant}")


@tenants_app.command("resume")
def tenants_resume(ctx: typer.Context, tenant: TenantArg, reason: ReasonOpt = None) -> None:
    """Lift a suspension: the tenant's tokens work again."""
    tid = _id("ten", tenant, "TENANT")
    _run(ctx, lambda c: tenants.resume_tenant(c, tid, reason=reason))
    console.print(f"resumed {tenant}")


@tenants_app.command("republish")
def tenants_republish(ctx: typer.Context, tenant: TenantArg, reason: ReasonOpt = None) -> None:
    """After NATS lost the tenant's stream: publish every message still waiting again."""
    tid = _id("ten", tenant, "TENANT")
    count = _run(ctx, lambda c: tenants.republish_undelivered(c, tid, reason=reason))
    console.print(
        f"{count} waiting messages of {tenant} go out again with the reconciler's next pass"
    )


@workspaces_app.command("create")
def workspaces_create(
    ctx: typer.Context,
    tenant: TenantOpt,
    slug: Annotated[str, typer.Argument(help="3-40 of a-z, 0-9, '-'.")],
    name: Annotated[str, typer.Option(help="Display name.")],
    description: Annotated[str | None, typer.Option(help="Shown in the console.")] = None,
) -> None:
    """Create a workspace."""
    tid = _id("ten", tenant, "--tenant")
    row = _run(
        ctx,
        lambda c: workspaces.create_workspace(
            c, tid, slug=slug, display_name=name, description=description
        ),
    )
    console.print(f"created workspace {format_id('ws', row['id'])} ({slug})")


@workspaces_app.command("list")
def workspaces_list(ctx: typer.Context, tenant: TenantOpt, as_json: JsonFlag = False) -> None:
    """The tenant's workspaces."""
    tid = _id("ten", tenant, "--tenant")
    rows = _run(ctx, lambda c: workspaces.list_workspaces(c, tid))
    _show(rows, "ws", ["id", "slug", "display_name", "created_at"], as_json)


@users_app.command("create")
def users_create(
    ctx: typer.Context,
    tenant: TenantOpt,
    email: Annotated[str, typer.Option(help="E-mail address.")],
    idp: Annotated[str, typer.Option(help="IdP ('clerk', 'oidc:<issuer>', ...).")] = "oidc:local",
    subject: Annotated[str | None, typer.Option(help="IdP subject (default: e-mail).")] = None,
    name: Annotated[str | None, typer.Option(help="Display name.")] = None,
    role: Annotated[str, typer.Option(help="owner, admin, member, auditor or billing.")] = "member",
) -> None:
    """Create a user with a tenant role."""
    tid = _id("ten", tenant, "--tenant")
    spec = users.OwnerSpec(email, idp, subject or email, name)
    row = _run(ctx, lambda c: users.create_user(c, tid, spec, role=role))
    console.print(f"created user {format_id('usr', row['id'])} ({row['email']}, {role})")


@users_app.command("list")
def users_list(ctx: typer.Context, tenant: TenantOpt, as_json: JsonFlag = False) -> None:
    """The tenant's users and their tenant roles."""
    tid = _id("ten", tenant, "--tenant")
    rows = _run(ctx, lambda c: users.list_users(c, tid))
    _show(rows, "usr", ["id", "email", "tenant_role", "status", "idp"], as_json)


@users_app.command("restore-owner")
def users_restore_owner(
    ctx: typer.Context,
    tenant: TenantOpt,
    user: Annotated[str, typer.Argument(help="User id (usr_...) of the tenant.")],
) -> None:
    """Make a user of the tenant an active owner again.

    For a tenant whose owners are gone or locked out; audited as the operator's user.update."""
    tid, uid = _id("ten", tenant, "--tenant"), _id("usr", user, "USER")
    _run(ctx, lambda c: users.change_user(c, tid, uid, status="active", tenant_role="owner"))
    console.print(f"{user} is an active owner of {tenant}")


@users_app.command("console-link")
def users_console_link(
    ctx: typer.Context,
    tenant: TenantOpt,
    email: Annotated[str, typer.Argument(help="E-mail of an owner or admin of the tenant.")],
    base_url: Annotated[
        str,
        typer.Option(
            help="How the user's browser reaches the gateway.", envvar="AGENTBUS_PUBLIC_URL"
        ),
    ] = "http://127.0.0.1:7900",
) -> None:
    """A one-time console sign-in link for an owner or admin (works once, for 15 minutes)."""
    from agentbus.console.sessions import mint_link

    tid = _id("ten", tenant, "--tenant")
    link = _run(ctx, lambda c: mint_link(c.pool, tid, email))
    console.print(
        f"{base_url.rstrip('/')}/console/sign-in?link={link}", markup=False, soft_wrap=True
    )


def _print_token(issued: tokens.IssuedToken) -> None:
    console.print(f"token {format_id('tok', issued.row['id'])}, shown once; store it now:")
    typer.echo(issued.plaintext)


@tokens_app.command("create")
def tokens_create(
    ctx: typer.Context,
    tenant: TenantOpt,
    owner: Annotated[str, typer.Option(help="Owning user (usr_...).")],
    name: Annotated[str, typer.Option(help="What it is for ('ci-runner').")],
    env: Annotated[str, typer.Option(help="live or test.")] = "live",
    workspace: Annotated[str | None, typer.Option(help="Bind to a workspace (ws_...).")] = None,
    scope: Annotated[
        list[str] | None,
        typer.Option(
            help="Repeat: send, receive, register, read_audit, admin"
            " (default: send receive register)."
        ),
    ] = None,
    expires_in_days: Annotated[int | None, typer.Option(min=1, help="Expire after N days.")] = None,
) -> None:
    """Create an integration token; the plaintext is printed once and never stored."""
    tid, uid = _id("ten", tenant, "--tenant"), _id("usr", owner, "--owner")
    wid = None if workspace is None else _id("ws", workspace, "--workspace")
    expires = None
    if expires_in_days is not None:
        expires = datetime.now(UTC) + timedelta(days=expires_in_days)
    issued = _run(
        ctx,
        lambda c: tokens.create_integration_token(
            c,
            tid,
            owner_user_id=uid,
            name=name,
            env=env,
            workspace_id=wid,
            scopes=scope or DEFAULT_SCOPES,
            expires_at=expires,
        ),
    )
    _print_token(issued)


@tokens_app.command("list")
def tokens_list(
    ctx: typer.Context,
    tenant: TenantOpt,
    include_revoked: Annotated[bool, typer.Option(help="Also revoked tokens.")] = False,
    as_json: JsonFlag = False,
) -> None:
    """The tenant's tokens: prefix and last four characters, never the token."""
    tid = _id("ten", tenant, "--tenant")
    rows = _run(
        ctx, lambda c: tokens.list_integration_tokens(c, tid, include_revoked=include_revoked)
    )
    cols = ["id", "name", "env", "prefix", "last4", "scopes", "expires_at", "revoked_at"]
    _show(rows, "tok", cols, as_json)


@tokens_app.command("revoke")
def tokens_revoke(
    ctx: typer.Context,
    tenant: TenantOpt,
    token: Annotated[str, typer.Argument(help="Token id (tok_...).")],
    reason: Annotated[str | None, typer.Option(help="Why; kept on the token.")] = None,
) -> None:
    """Revoke a token; it stops verifying at once."""
    tid, kid = _id("ten", tenant, "--tenant"), _id("tok", token, "TOKEN")
    _run(ctx, lambda c: tokens.revoke_integration_token(c, tid, kid, reason=reason))
    console.print(f"revoked {token}")


@app.command("audit")
def audit_list(
    ctx: typer.Context,
    tenant: TenantOpt,
    action: Annotated[str | None, typer.Option(help="Only this action, e.g. token.revoke.")] = None,
    target: Annotated[str | None, typer.Option(help="Only actions on this id.")] = None,
    limit: Annotated[int, typer.Option(min=1, max=10_000)] = 100,
    as_json: JsonFlag = False,
) -> None:
    """The tenant's audit log of elevated actions, newest first."""
    tid = _id("ten", tenant, "--tenant")
    rows = _run(
        ctx, lambda c: audit.list_actions(c, tid, action=action, target_id=target, limit=limit)
    )
    if as_json:
        _show(rows, "", [], as_json)
        return
    for row in (public(r, "") for r in rows):  # one line each: the details are free-form
        console.print(
            f"{row['at']}  {row['actor_id']}  {row['action']}  {row['target_id'] or '-'}  "
            f"{json.dumps(row['details'], sort_keys=True)}",
            markup=False, soft_wrap=True, highlight=False,
        )  # fmt: skip
