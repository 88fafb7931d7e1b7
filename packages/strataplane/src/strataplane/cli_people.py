"""``strataplane teams|members|bindings|enrollment-tokens|agents ...``: the tenant's people,
their roles and its agents from a terminal, over the HTTP API (logged in as for ``cs``).
Teams are named by slug or id, people by username or id."""

from __future__ import annotations

from typing import Annotated, Any

import typer
from wirekit.clierrors import CliError

from strataplane.cli_spec import Client, client, e, out

teams_app = typer.Typer(help="Teams and their members.", no_args_is_help=True)
members_app = typer.Typer(help="The tenant's members (local users).", no_args_is_help=True)
bindings_app = typer.Typer(help="Role bindings: who holds which role where.", no_args_is_help=True)
tokens_app = typer.Typer(help="Enrollment tokens for new agents.", no_args_is_help=True)
agents_app = typer.Typer(help="Enrolled agents: state, approval, removal.", no_args_is_help=True)

Labels = Annotated[list[str] | None, typer.Option("--label", help="key=value (repeat).")]


def _pairs(given: list[str] | None) -> dict[str, str]:
    pairs = {}
    for item in given or []:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise typer.BadParameter(f"not key=value: {item}")
        pairs[key] = value
    return pairs


def _all(http: Client, route: str, **params: Any) -> list[dict[str, Any]]:
    """Every item of a paged list."""
    found: list[dict[str, Any]] = []
    after = None
    while True:
        page = http.get(route, after=after, limit=500, **params)
        found += page["items"]
        after = page["next"]
        if after is None:
            return found


def _team_id(http: Client, team: str) -> str:
    for t in _all(http, "/teams"):
        if team in (t["slug"], t["id"]):
            return str(t["id"])
    raise CliError("team.not_found", f"no team {team}")


def _user_id(http: Client, user: str) -> str:
    for m in _all(http, "/members"):
        if user in (m["subject"], m["user_id"]):
            return str(m["user_id"])
    raise CliError("member.not_found", f"no member {user}")


def _table(columns: tuple[str, ...], rows: list[tuple[Any, ...]]) -> None:
    """Aligned columns, one line per row, never truncated (a terminal may be narrow; a script
    may read it)."""
    cells = [columns, *(tuple(str("-" if v is None else v) for v in row) for row in rows)]
    widths = [max(len(r[i]) for r in cells) for i in range(len(columns))]
    for row in cells:
        out.print(e("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()))


@teams_app.command("list")
def teams_list(ctx: typer.Context) -> None:
    """Teams by slug."""
    found = _all(client(ctx), "/teams")
    _table(("slug", "name", "id"), [(t["slug"], t["display_name"], t["id"]) for t in found])


@teams_app.command("create")
def teams_create(ctx: typer.Context, slug: str, name: Annotated[str, typer.Argument()]) -> None:
    """A team (owners in the spec name teams by slug)."""
    t = client(ctx).call("POST", "/teams", body={"slug": slug, "display_name": name}).json()
    out.print(f"team {e(t['slug'])} {t['id']}")


@teams_app.command("delete")
def teams_delete(ctx: typer.Context, team: str) -> None:
    """Delete a team (refused while the spec or a binding names it)."""
    http = client(ctx)
    http.call("DELETE", f"/teams/{_team_id(http, team)}")
    out.print(f"deleted team {e(team)}")


@teams_app.command("members")
def teams_members(ctx: typer.Context, team: str) -> None:
    """A team's members."""
    http = client(ctx)
    found = http.get(f"/teams/{_team_id(http, team)}/members")
    _table(("name", "kind", "id"), [(m["display_name"], m["kind"], m["user_id"]) for m in found])


@teams_app.command("add")
def teams_add(ctx: typer.Context, team: str, user: str) -> None:
    """Add a member of the tenant to a team."""
    http = client(ctx)
    body = {"user_id": _user_id(http, user)}
    http.call("POST", f"/teams/{_team_id(http, team)}/members", body=body)
    out.print(f"{e(user)} is in {e(team)}")


@teams_app.command("remove")
def teams_remove(ctx: typer.Context, team: str, user: str) -> None:
    """Take a member out of a team."""
    http = client(ctx)
    http.call("DELETE", f"/teams/{_team_id(http, team)}/members/{_user_id(http, user)}")
    out.print(f"{e(user)} left {e(team)}")


@members_app.command("list")
def members_list(ctx: typer.Context) -> None:
    """Members of the tenant."""
    rows = [
        (m["subject"], m["display_name"], m["kind"], "disabled" if m["disabled_at"] else "active")
        for m in _all(client(ctx), "/members")
    ]
    _table(("username", "name", "kind", "state"), rows)


@members_app.command("add")
def members_add(
    ctx: typer.Context,
    username: str,
    password: Annotated[str, typer.Option(prompt=True, hide_input=True)],
    display_name: Annotated[str | None, typer.Option()] = None,
    email: Annotated[str | None, typer.Option()] = None,
) -> None:
    """A new local user of the tenant (no role until a binding gives one)."""
    body = {"username": username, "password": password, "display_name": display_name}
    m = client(ctx).call("POST", "/members", body={**body, "email": email}).json()
    out.print(f"member {e(m['subject'])} {m['user_id']}")


@members_app.command("remove")
def members_remove(ctx: typer.Context, user: str) -> None:
    """Remove a member (the tenant's last admin stays)."""
    http = client(ctx)
    http.call("DELETE", f"/members/{_user_id(http, user)}")
    out.print(f"removed {e(user)}")


@bindings_app.command("list")
def bindings_list(ctx: typer.Context) -> None:
    """Role bindings."""
    rows = [
        (
            b["id"],
            b["role"],
            b["user_id"] or f"team {b['team_id']}",
            b["scope_kind"],
            b["scope_team_id"] or b["scope_selector"],
        )
        for b in _all(client(ctx), "/role-bindings")
    ]
    _table(("id", "role", "holder", "scope", "scope of"), rows)


@bindings_app.command("create")
def bindings_create(
    ctx: typer.Context,
    role: Annotated[str, typer.Argument(help="viewer, author, approver, operator, ...")],
    user: Annotated[str | None, typer.Option(help="Username or id.")] = None,
    team: Annotated[str | None, typer.Option(help="Team slug or id (its members).")] = None,
    owner: Annotated[str | None, typer.Option(help="Scope: files this team owns.")] = None,
    label: Labels = None,
) -> None:
    """Give a person or a team a role, in the whole tenant or a scope."""
    http = client(ctx)
    if (user is None) == (team is None):
        raise typer.BadParameter("give --user or --team")
    body: dict[str, Any] = {"role": role}
    if user is not None:
        body["user_id"] = _user_id(http, user)
    if team is not None:
        body["team_id"] = _team_id(http, team)
    if owner is not None:
        body["scope_kind"], body["scope_team_id"] = "owner", _team_id(http, owner)
    elif label:
        body["scope_kind"], body["scope_selector"] = "selector", {"matchLabels": _pairs(label)}
    b = http.call("POST", "/role-bindings", body=body).json()
    out.print(f"binding {b['id']}: {e(b['role'])} ({e(b['scope_kind'])})")


@bindings_app.command("delete")
def bindings_delete(ctx: typer.Context, binding_id: str) -> None:
    """Remove a role binding."""
    client(ctx).call("DELETE", f"/role-bindings/{binding_id}")
    out.print(f"deleted {e(binding_id)}")


@tokens_app.command("list")
def tokens_list(ctx: typer.Context) -> None:
    """Enrollment tokens (prefixes only)."""
    rows = [
        (t["name"], t["token_prefix"], t["labels"], t["uses"], t["revoked_at"] or "", t["id"])
        for t in client(ctx).get("/enrollment-tokens")
    ]
    _table(("name", "prefix", "labels", "uses", "revoked", "id"), rows)


@tokens_app.command("create")
def tokens_create(
    ctx: typer.Context,
    name: str,
    label: Labels = None,
    host_kind: Annotated[str, typer.Option(help="server, client or pod.")] = "server",
    max_uses: Annotated[int | None, typer.Option(min=1)] = None,
    requires_approval: Annotated[bool, typer.Option()] = False,
    agent_kind: Annotated[
        str, typer.Option(help="telegraf, vector or elastic-agent.")
    ] = "telegraf",
) -> None:
    """A token agents enroll with; their hosts get its labels. Printed once."""
    body = {
        "name": name,
        "agent_kind": agent_kind,
        "labels": _pairs(label),
        "host_kind": host_kind,
        "max_uses": max_uses,
        "requires_approval": requires_approval,
    }
    t = client(ctx).call("POST", "/enrollment-tokens", body=body).json()
    out.print(f"enrollment token {e(t['name'])} {t['id']} (shown once):")
    out.out(t["token"])


@tokens_app.command("revoke")
def tokens_revoke(ctx: typer.Context, token_id: str) -> None:
    """Revoke an enrollment token (enrolled agents keep their credentials)."""
    client(ctx).call("DELETE", f"/enrollment-tokens/{token_id}")
    out.print(f"revoked {e(token_id)}")


def _agent_row(a: dict[str, Any]) -> tuple[Any, ...]:
    return (
        a["id"],
        a["kind"],
        a["external_id"],
        a["version"],
        a["health"],
        a["sync"],
        a["desired_revision_id"],
        a["applied_revision_id"],
    )


_AGENT_COLUMNS = ("id", "kind", "instance", "version", "health", "sync", "desired", "applied")


@agents_app.command("list")
def agents_list(
    ctx: typer.Context,
    kind: Annotated[str | None, typer.Option()] = None,
    health: Annotated[str | None, typer.Option(help="healthy, degraded, failed, ...")] = None,
    sync: Annotated[str | None, typer.Option(help="in_sync, updating, out_of_sync, ...")] = None,
    version: Annotated[str | None, typer.Option()] = None,
    label: Labels = None,
) -> None:
    """Agents, filtered by kind, health, sync, version and their host's labels."""
    params = {"kind": kind, "health": health, "sync": sync, "version": version}
    given: dict[str, Any] = {k: v for k, v in params.items() if v is not None}
    if label:
        given["label"] = label
    found = _all(client(ctx), "/agents", **given)
    _table(_AGENT_COLUMNS, [_agent_row(a) for a in found])


@agents_app.command("show")
def agents_show(ctx: typer.Context, agent_id: str) -> None:
    """One agent with the reasons of its health and sync."""
    a = client(ctx).get(f"/agents/{agent_id}")
    _table(_AGENT_COLUMNS, [_agent_row(a)])
    for what in ("health_message", "sync_reason"):
        if a[what]:
            out.print(f"{what.split('_')[0]}: {e(a[what])}")


@agents_app.command("approve")
def agents_approve(ctx: typer.Context, agent_id: str) -> None:
    """Approve an agent whose token requires approval: it gets its configuration."""
    client(ctx).call("POST", f"/agents/{agent_id}/approve")
    out.print(f"approved {e(agent_id)}")


@agents_app.command("forget")
def agents_forget(ctx: typer.Context, agent_id: str) -> None:
    """Delete an agent and revoke its credential."""
    client(ctx).call("DELETE", f"/agents/{agent_id}")
    out.print(f"forgot {e(agent_id)}")


def register(app: typer.Typer) -> None:
    app.add_typer(teams_app, name="teams")
    app.add_typer(members_app, name="members")
    app.add_typer(bindings_app, name="bindings")
    app.add_typer(tokens_app, name="enrollment-tokens")
    app.add_typer(agents_app, name="agents")
