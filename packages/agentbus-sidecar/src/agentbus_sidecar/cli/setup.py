"""``agentbus init``, ``login`` and ``register``. Secrets are read, stored, never printed."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from agentbus_sidecar.actions.setup import init_credentials, login, register_agent
from agentbus_sidecar.cli.app import app
from agentbus_sidecar.cli.common import JsonFlag, emit, guarded, paths, run
from agentbus_sidecar.credentials import Credentials
from agentbus_sidecar.keys import fingerprint

if TYPE_CHECKING:
    from rich.console import Console

TokenOption = Annotated[
    str | None,
    typer.Option(
        "--token",
        envvar="AGENTBUS_TOKEN",
        help="Integration token. Prefer $AGENTBUS_TOKEN or the hidden prompt to the command line.",
    ),
]

PANEL = "Setup"


def _ask_token(token: str | None) -> str | None:
    if token is None and sys.stdin.isatty():
        answer = typer.prompt("Integration token", hide_input=True, default="", show_default=False)
        return str(answer) or None
    return token


def _summary(path: Path, creds: Credentials) -> dict[str, str | None]:
    return {
        "credentials": str(path),
        "address": creds.address,
        "gateway": creds.gateway_url,
        "token": creds.token_hint,
        "key_fingerprint": fingerprint(creds.signing_key()),
        "agent_id": creds.agent_id,
        "key_id": creds.key_id,
    }


def _show(summary: dict[str, str | None], headline: str, hint: str) -> Callable[[Console], None]:
    def human(out: Console) -> None:
        out.print(headline)
        for name, value in summary.items():
            out.print(f"  {name:<16} {value or '-'}")
        out.print(hint)

    return human


@app.command(rich_help_panel=PANEL)
def init(
    ctx: typer.Context,
    gateway: Annotated[
        str,
        typer.Option(
            "--gateway", envvar="AGENTBUS_GATEWAY", prompt="Gateway URL", help="https://<gateway>"
        ),
    ],
    address: Annotated[
        str,
        typer.Option(
            "--address", prompt="Agent address", help="agent://<tenant>/<workspace>/<name>"
        ),
    ],
    token: TokenOption = None,
    key_file: Annotated[
        Path | None,
        typer.Option(
            "--key-file", help="Import this Ed25519 key (PEM or raw base64) instead of a new one."
        ),
    ] = None,
    force: Annotated[bool, typer.Option("--force", help="Replace existing credentials.")] = False,
    as_json: JsonFlag = False,
) -> None:
    """Create credentials.json (mode 0600) with a new Ed25519 agent key."""
    path = paths(ctx).credentials
    with guarded(as_json):
        key_text = key_file.read_text(encoding="utf-8") if key_file else None
        creds = init_credentials(
            path,
            gateway_url=gateway,
            address=address,
            token=_ask_token(token),
            key_text=key_text,
            force=force,
        )
    summary = _summary(path, creds)
    hint = "Next: agentbus register" if creds.integration_token else "Next: agentbus login"
    emit(as_json, summary, _show(summary, f"Credentials written to {path} (mode 0600).", hint))


@app.command(name="login", rich_help_panel=PANEL)
def login_command(
    ctx: typer.Context,
    token: TokenOption = None,
    gateway: Annotated[str | None, typer.Option("--gateway", envvar="AGENTBUS_GATEWAY")] = None,
    address: Annotated[
        str | None, typer.Option("--address", help="Needed only when no credentials exist yet.")
    ] = None,
    as_json: JsonFlag = False,
) -> None:
    """Store an integration token (creating credentials and a key if there are none)."""
    path = paths(ctx).credentials
    token = _ask_token(token)
    if not token:
        raise typer.BadParameter("no token given (use $AGENTBUS_TOKEN, --token or the prompt)")
    with guarded(as_json):
        if path.exists():
            creds = login(path, token=token, gateway_url=gateway)
        else:
            if not gateway or not address:
                raise typer.BadParameter("first login needs --gateway and --address")
            creds = init_credentials(path, gateway_url=gateway, address=address, token=token)
    summary = _summary(path, creds)
    hint = "Next: agentbus register" if not creds.agent_id else "Ready."
    emit(as_json, summary, _show(summary, f"Token stored in {path} (mode 0600).", hint))


@app.command(rich_help_panel=PANEL)
def register(
    ctx: typer.Context,
    display_name: Annotated[str | None, typer.Option("--display-name")] = None,
    description: Annotated[str | None, typer.Option("--description")] = None,
    capability: Annotated[
        list[str] | None,
        typer.Option("--capability", help="NAME[:VERSION[:DESCRIPTION]], repeatable."),
    ] = None,
    harness: Annotated[str, typer.Option("--harness")] = "custom",
    harness_version: Annotated[str | None, typer.Option("--harness-version")] = None,
    mode: Annotated[str, typer.Option("--mode", help="interactive or service")] = "interactive",
    visibility: Annotated[str, typer.Option("--visibility")] = "workspace",
    strict_order: Annotated[bool, typer.Option("--strict-order")] = False,
    as_json: JsonFlag = False,
) -> None:
    """Register this agent and its public key with the gateway."""
    caps = []
    for spec in capability or []:
        name, version, text = [*spec.split(":", 2), "", ""][:3]
        caps.append({"name": name, "version": version or "1", "description": text})
    options = {
        "display_name": display_name,
        "description": description,
        "capabilities": caps,
        "harness": harness,
        "harness_version": harness_version,
        "mode": mode,
        "visibility": visibility,
        "delivery": {"strict_order": strict_order},
    }
    where = paths(ctx)
    with guarded(as_json):
        answer = run(register_agent(where.credentials, where.state_dir, options))
    agent, key = answer.get("agent") or {}, answer.get("key") or {}

    def human(out: Console) -> None:
        out.print(f"Registered {agent.get('address')} as {agent.get('id')}.")
        out.print(
            f"  key {key.get('id')}, fingerprint {key.get('fingerprint')}, "
            f"expires {key.get('expires_at')}"
        )

    emit(as_json, answer, human)
