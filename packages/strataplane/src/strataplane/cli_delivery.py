"""``strataplane rollouts ...``, ``strataplane pins ...`` (over the HTTP API, logged in as for
``cs``) and ``strataplane catalog ...`` (import with the database URL, as a platform task)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from strataplane.cli_spec import client, e, out

rollouts_app = typer.Typer(help="Staged rollouts: progress and operation.", no_args_is_help=True)
pins_app = typer.Typer(help="Pins: hold agents at a revision.", no_args_is_help=True)
catalog_app = typer.Typer(help="The plugin catalog.", no_args_is_help=True)

Ref = Annotated[str, typer.Argument(help="RO-17, 17 or the rollout id.")]


def _show(r: dict[str, Any]) -> None:
    out.print(
        f"[bold]{e(r['name'])}[/] {e(r['agent_kind'])} r{r['from_revision_id']} -> "
        f"r{r['to_revision_id']} [bold]{e(r['state'])}[/] policy {e(r['policy_name'] or '-')}"
    )
    if r.get("halt_reason"):
        out.print(f"  halted: {e(r['halt_reason'])}")
    if "stages" not in r:
        return
    table = Table("stage", "state", "bake", "agents", "in sync", "not reporting", "guardrails")
    for s in r["stages"]:
        g = s["guardrails"] or {}
        values = ", ".join(f"{k}={v}" for k, v in g.items())
        table.add_row(
            e(s["name"]),
            e(s["state"]),
            f"{s['bake_seconds']:g}s",
            str(s["agents_total"] if s["agents_total"] is not None else "-"),
            str(s["in_sync"]),
            str(s["not_reporting"]),
            e(values),
        )
    out.print(table)


@rollouts_app.command("list")
def rollouts_list(ctx: typer.Context, state: Annotated[str | None, typer.Option()] = None) -> None:
    """Rollouts, newest first."""
    for r in client(ctx).get("/rollouts", state=state):
        _show(r)


@rollouts_app.command("show")
def rollouts_show(ctx: typer.Context, ref: Ref) -> None:
    """A rollout with each stage's progress and guardrail values."""
    _show(client(ctx).get(f"/rollouts/{ref}"))


def _verb(name: str, doc: str) -> None:
    def command(ctx: typer.Context, ref: Ref) -> None:
        _show(client(ctx).call("POST", f"/rollouts/{ref}/{name}").json())

    command.__doc__ = doc
    rollouts_app.command(name)(command)


_verb("pause", "Stop a running rollout where it is.")
_verb("resume", "Continue a paused or halted rollout (resuming a halt accepts the breach).")
_verb("advance", "End the running stage's bake time now; its guardrails are evaluated.")
_verb("abort", "End the rollout: its agents fall back to the release pointer.")


@rollouts_app.command("create")
def rollouts_create(
    ctx: typer.Context,
    revision: Annotated[int, typer.Argument(help="Revision to roll out.")],
    policy: Annotated[str | None, typer.Option(help="RolloutPolicy name.")] = None,
    agent_kind: Annotated[str, typer.Option()] = "telegraf",
) -> None:
    """Roll out a revision (a revert, or again after an abort), staged by the policy."""
    body = {"agent_kind": agent_kind, "to_revision": revision, "policy": policy}
    _show(client(ctx).call("POST", "/rollouts", body=body).json())


def _pin(p: dict[str, Any]) -> None:
    target = p["agent_instance_id"] or f"{p['agent_kinds']} {p['selector']}"
    until = p["expires_at"] or "no expiry"
    out.print(f"{p['id']} r{p['revision_id']} {e(target)} until {e(until)}: {e(p['reason'])}")


@pins_app.command("list")
def pins_list(ctx: typer.Context, active: Annotated[bool, typer.Option()] = False) -> None:
    """Pins, newest first."""
    for p in client(ctx).get("/pins", active=str(active).lower()):
        _pin(p)


@pins_app.command("create")
def pins_create(
    ctx: typer.Context,
    revision: Annotated[int, typer.Argument()],
    reason: Annotated[str, typer.Option(help="Why (kept in the pin and the audit log).")],
    agent: Annotated[str | None, typer.Option(help="Agent id.")] = None,
    label: Annotated[
        list[str] | None, typer.Option(help="key=value; pins agents on matching hosts.")
    ] = None,
    expires_in: Annotated[int | None, typer.Option(help="Seconds until it expires.")] = None,
) -> None:
    """Hold an agent, or the agents on hosts with these labels, at a revision."""
    body: dict[str, Any] = {"revision": revision, "reason": reason}
    if agent:
        body["agent_id"] = agent
    if label:
        pairs = dict(item.split("=", 1) for item in label)
        body["selector"], body["agent_kinds"] = {"matchLabels": pairs}, ["telegraf"]
    if expires_in:
        body["expires_in_seconds"] = expires_in
    _pin(client(ctx).call("POST", "/pins", body=body).json())


@pins_app.command("delete")
def pins_delete(ctx: typer.Context, pin_id: Annotated[str, typer.Argument()]) -> None:
    """Remove a pin: its agents follow their rollout or the release pointer again."""
    client(ctx).call("DELETE", f"/pins/{pin_id}")
    out.print(f"deleted {e(pin_id)}")


@catalog_app.command("list")
def catalog_list(ctx: typer.Context) -> None:
    """Imported catalog bundles."""
    for b in client(ctx).get("/catalog"):
        counts = ", ".join(f"{k} {v}" for k, v in b["contents"].get("schemas", {}).items())
        out.print(f"{e(b['agent_kind'])} {e(b['version'])} sha256 {b['bundle_hash'][:16]} {counts}")


async def _import(admin_url: str, data: bytes, signature: str) -> str:
    from strataplane.actions import catalog
    from strataplane.actions.admin import cli_services
    from strataplane.actions.context import system_ctx

    async with cli_services(admin_url) as services:
        row = await catalog.import_bundle(system_ctx(services), data, signature)
    assert row is not None
    return f"{row.agent_kind} {row.version}"


@catalog_app.command("import")
def catalog_import(
    bundle: Annotated[Path, typer.Argument(help="telegraf-<version>.json(.zst)")],
    signature: Annotated[Path, typer.Argument(help="Its .sig file.")],
    database_url: Annotated[str | None, typer.Option(envvar="STRATAPLANE_DATABASE_URL")] = None,
) -> None:
    """Import a signed bundle (refused unless a trusted key verifies it)."""
    from strataplane import db

    url = db.resolve_admin_url(database_url)
    imported = asyncio.run(_import(url, bundle.read_bytes(), signature.read_text()))
    out.print(f"imported {e(imported)}")


def register(app: typer.Typer) -> None:
    app.add_typer(rollouts_app, name="rollouts")
    app.add_typer(pins_app, name="pins")
    app.add_typer(catalog_app, name="catalog")
