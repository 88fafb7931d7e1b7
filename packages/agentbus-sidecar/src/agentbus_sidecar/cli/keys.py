"""``agentbus keys list | rotate | revoke``: the agent's signing keys (04-API-SPEC.md §2.4)."""

from __future__ import annotations

from dataclasses import asdict
from typing import TYPE_CHECKING, Annotated, Any

import typer

from agentbus_sidecar.cli.app import keys_app
from agentbus_sidecar.cli.common import JsonFlag, emit, guarded, paths, run
from agentbus_sidecar.rotation import rotate_key
from agentbus_sidecar.runtime import open_runtime

if TYPE_CHECKING:
    from rich.console import Console


@keys_app.command(name="list")
def keys_list(ctx: typer.Context, as_json: JsonFlag = False) -> None:
    """The agent's keys at the gateway, oldest first; the one this sidecar signs with marked."""

    async def act() -> list[dict[str, Any]]:
        async with open_runtime(paths(ctx).credentials, paths(ctx).state_dir) as rt:
            keys = await rt.session.call(rt.client.list_keys, rt.agent_id)
            return [{**key, "current": key.get("id") == rt.key_id} for key in keys]

    with guarded(as_json):
        keys = run(act())

    def human(out: Console) -> None:
        for key in keys:
            state = "revoked" if key.get("revoked_at") else "usable"
            mark = "*" if key["current"] else " "
            out.print(
                f"{mark} {key.get('id')}  {state:<7}  expires {key.get('expires_at')}  "
                f"{key.get('fingerprint')}",
                markup=False,
            )

    emit(as_json, {"keys": keys}, human)


@keys_app.command(name="rotate")
def keys_rotate(ctx: typer.Context, as_json: JsonFlag = False) -> None:
    """Add a new key now and sign with it; the old one stays usable until it expires."""

    async def act() -> dict[str, Any]:
        async with open_runtime(paths(ctx).credentials, paths(ctx).state_dir) as rt:
            return asdict(await rotate_key(rt))

    with guarded(as_json):
        done = run(act())

    def human(out: Console) -> None:
        out.print(
            f"now signing with {done['key_id']} (fingerprint {done['fingerprint']}, expires "
            f"{done['expires_at']}); {done['old_key_id']} stays usable until it expires or "
            f"`agentbus keys revoke {done['old_key_id']}`",
            markup=False,
        )
        if done["signed_again"]:
            count = len(done["signed_again"])
            out.print(f"{count} send(s) refused for the old key signed again and queued")

    emit(as_json, done, human)


@keys_app.command(name="revoke")
def keys_revoke(
    ctx: typer.Context,
    key_id: Annotated[str, typer.Argument(help="key_ id (never the last usable one)")],
    as_json: JsonFlag = False,
) -> None:
    """Revoke one of the agent's keys: envelopes signed with it are refused from then on."""

    async def act() -> None:
        async with open_runtime(paths(ctx).credentials, paths(ctx).state_dir) as rt:
            await rt.session.call(rt.client.revoke_key, rt.agent_id, key_id)

    with guarded(as_json):
        run(act())
    emit(as_json, {"revoked": key_id}, lambda out: out.print(f"revoked {key_id}", markup=False))
