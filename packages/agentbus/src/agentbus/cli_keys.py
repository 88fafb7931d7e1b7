"""``agentbus-gateway keys``: tenant data keys, a tenant's key encryption key, the deployment
keyring and the daily key jobs, from the operator's side (the same actions as ``/v1/keys``)."""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer

from agentbus import admin_cli
from agentbus.actions import keys
from agentbus.actions.context import Ctx
from agentbus.admin_cli import TenantOpt, _id, _run, console
from agentbus.controllers.keys import KeyJobs
from agentbus.gateway.actions.signing import SigningKeys
from agentbus.keys import TenantKeyStore
from agentbus.kms import providers_from
from agentbus.settings import Settings
from agentbus.tenant_crypto import TenantCrypto

app = typer.Typer(
    help="Tenant data keys, BYOK, the deployment keyring, the key jobs.",
    no_args_is_help=True,
    callback=admin_cli.admin,
)


def _crypto(c: Ctx) -> TenantCrypto:
    assert c.keyring is not None
    return TenantCrypto(c.pool, TenantKeyStore(c.pool), providers_from(Settings(), c.keyring))


def _print(value: Any) -> None:
    typer.echo(json.dumps(value, indent=2, default=str))


@app.command("list")
def list_keys(ctx: typer.Context, tenant: TenantOpt) -> None:
    """The tenant's KEK and data key versions."""
    tid = _id("ten", tenant, "--tenant")
    _print(_run(ctx, lambda c: keys.list_keys(c, tid)))


@app.command("rotate")
def rotate(ctx: typer.Context, tenant: TenantOpt) -> None:
    """Give the tenant a new active data key now; older versions stay readable."""
    tid = _id("ten", tenant, "--tenant")
    row = _run(ctx, lambda c: keys.rotate_data_key(c, tid, _crypto(c)), keyring=True)
    console.print(f"tenant data key version {row['version']} is active")


@app.command("kek")
def kek(
    ctx: typer.Context,
    tenant: TenantOpt,
    ref: Annotated[
        str, typer.Option(help="kms://aws/<key ARN> or kms://platform/deployment-keyring.")
    ],
) -> None:
    """Move the tenant's data keys under another key encryption key (BYOK)."""
    tid = _id("ten", tenant, "--tenant")
    _print(_run(ctx, lambda c: keys.set_kek(c, tid, ref, _crypto(c)), keyring=True))


@app.command("rotate-keyring")
def rotate_keyring(ctx: typer.Context) -> None:
    """Add a deployment keyring key; data keys move under it lazily and by the daily job."""

    async def go(c: Ctx) -> int:
        assert c.keyring is not None
        return c.keyring.add_key().id

    console.print(f"deployment key {_run(ctx, go, keyring=True)} is active")


@app.command("run")
def run(ctx: typer.Context) -> None:
    """Run the daily keys.rotate and retention.tokens jobs once."""

    async def go(c: Ctx) -> dict[str, Any]:
        assert c.keyring is not None
        signing = SigningKeys(c.keyring)
        await signing.refresh(c.pool)
        jobs = KeyJobs(c.pool, _crypto(c), signing)
        return {**await jobs.run_keys(), "tokens_purged": await jobs.purge_tokens()}

    _print(_run(ctx, go, keyring=True))
