"""``agentbus-gateway audit``: verify a tenant's audit chain, sign a checkpoint now, export it.

The operator's side of ``/v1/audit/verify``, ``POST /v1/audit/checkpoints`` and
``/v1/audit/export``, through the same actions, logged in as agentbus_app; and
``verify-export``, an export checked offline against the JWKS. ``verify`` and
``verify-export`` exit 1 when the chain is broken, naming the first bad row and the checkpoint
it breaks.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer
from platformkit.db.scope import tenant_transaction

from agentbus import admin_cli
from agentbus.actions import audit_chain
from agentbus.actions.audit_export import jwks_keys, verify_export
from agentbus.actions.context import Ctx
from agentbus.admin_cli import TenantOpt, _id, _run, console
from agentbus.db import SCOPE
from agentbus.gateway.actions.signing import SigningKeys

app = typer.Typer(
    help="The tenant audit chains: verify, checkpoint, export.",
    no_args_is_help=True,
    callback=admin_cli.admin,
)


@app.command("verify")
def verify(ctx: typer.Context, tenant: TenantOpt, as_json: admin_cli.JsonFlag = False) -> None:
    """Recompute the chain's hashes and check every checkpoint's signature."""
    tid = _id("ten", tenant, "--tenant")
    report = _run(ctx, lambda c: audit_chain.verify_tenant(c, tid))
    _print_report(report, as_json)


def _print_report(report: audit_chain.ChainReport, as_json: bool) -> None:
    if as_json:
        typer.echo(json.dumps(report.view(), indent=2))
    elif report.ok:
        console.print(
            f"[green]chain intact[/]: {report.checked} rows, "
            f"{report.checkpoints_verified} signed checkpoints verified"
        )
    else:
        broken = report.broken_checkpoint
        console.print(
            f"[red]chain broken[/] at seq {report.first_bad_seq}: {report.reason} "
            f"({report.detail})", markup=True, highlight=False,
        )  # fmt: skip
        console.print(
            f"breaks the checkpoint at seq {broken['seq']} signed by {broken['signing_kid']}"
            if broken
            else "no checkpoint after it yet",
            markup=False,
        )
        if report.last_good_checkpoint is not None:
            console.print(f"last good checkpoint: seq {report.last_good_checkpoint}")
    if not report.ok:
        raise typer.Exit(1)


@app.command("verify-export")
def verify_export_command(
    export: Annotated[Path, typer.Argument(help="A chain exported as JSON Lines.")],
    jwks: Annotated[Path, typer.Option(help="The gateway's /.well-known/jwks.json, saved.")],
    as_json: admin_cli.JsonFlag = False,
) -> None:
    """Verify an export offline, with nothing but the public keys: exit 1 when it is broken."""
    keys = jwks_keys(json.loads(jwks.read_text()))
    with export.open() as lines:
        report = verify_export(lines, keys)
    _print_report(report, as_json)


@app.command("checkpoint")
def checkpoint(ctx: typer.Context, tenant: TenantOpt) -> None:
    """Append a checkpoint signed by the gateway's current signing key, now."""
    tid = _id("ten", tenant, "--tenant")

    async def go(c: Ctx) -> dict[str, object]:
        assert c.keyring is not None
        keys = SigningKeys(c.keyring)
        await keys.refresh(c.pool)
        return audit_chain.row_view(await audit_chain.checkpoint_tenant(c, tid, keys.signer))

    row = _run(ctx, go, keyring=True)
    seq, digest, kid = row["seq"], row["row_hash"], row["signing_kid"]
    console.print(f"checkpoint at seq {seq}, hash {digest}, by {kid}")


@app.command("export")
def export(
    ctx: typer.Context,
    tenant: TenantOpt,
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="File to write (default: stdout).")
    ] = None,
) -> None:
    """The chain as JSON Lines, one row a line, audit actions with their full row."""
    tid = _id("ten", tenant, "--tenant")

    async def go(c: Ctx) -> int:
        count = 0
        out = sys.stdout.buffer if output is None else output.open("wb")
        try:
            async with tenant_transaction(c.pool, SCOPE, tid) as conn:
                async for line in audit_chain.export_lines(conn, tid):
                    out.write(line)
                    count += 1
        finally:
            if output is not None:
                out.close()
        return count

    count = _run(ctx, go)
    if output is not None:
        console.print(f"wrote {count} rows to {output}")
