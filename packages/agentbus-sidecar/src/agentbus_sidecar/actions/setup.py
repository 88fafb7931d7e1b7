"""Creating credentials and registering the agent (04-API-SPEC.md §2.1)."""

from __future__ import annotations

import socket
from contextlib import suppress
from pathlib import Path
from typing import Any

from agentbus_sidecar.addresses import RESERVED_NAMES, normalize_input, parse_address
from agentbus_sidecar.client import GatewayClient
from agentbus_sidecar.clock import server_now, server_offset_ms, set_server_offset_ms
from agentbus_sidecar.credentials import (
    Credentials,
    check_gateway_url,
    check_integration_token,
    load_credentials,
    save_credentials,
)
from agentbus_sidecar.errors import ConfigError, GatewayError, SidecarError
from agentbus_sidecar.keys import (
    generate_key,
    key_proof,
    load_private_key,
    private_key_pem,
    public_key_b64url,
)
from agentbus_sidecar.runtime import OFFSET_KEY, record_identity
from agentbus_sidecar.store import open_store, state_db_path
from agentbus_sidecar.store.meta import set_meta

__all__ = ["init_credentials", "login", "register_agent"]


def init_credentials(
    path: Path,
    *,
    gateway_url: str,
    address: str,
    token: str | None,
    key_text: str | None = None,
    force: bool = False,
) -> Credentials:
    """Write a new credentials.json with a fresh (or imported) Ed25519 key."""
    if path.exists() and not force:
        raise ConfigError(f"{path} already exists; pass --force to replace it and its key")
    try:
        canonical = normalize_input(address)
        key = load_private_key(key_text) if key_text else generate_key()
    except ValueError as exc:
        raise ConfigError(str(exc)) from exc
    if parse_address(canonical).name in RESERVED_NAMES:
        raise ConfigError(f"agent name {parse_address(canonical).name!r} is reserved (AB-3007)")
    creds = Credentials(
        gateway_url=check_gateway_url(gateway_url),
        address=canonical,
        private_key=private_key_pem(key),
        integration_token=check_integration_token(token) if token else None,
    )
    save_credentials(path, creds)
    return creds


def login(path: Path, *, token: str, gateway_url: str | None = None) -> Credentials:
    """Store a (new) integration token, keeping the key and the registration."""
    creds = load_credentials(path)
    creds.integration_token = check_integration_token(token)
    if gateway_url:
        creds.gateway_url = check_gateway_url(gateway_url)
    creds.agent_credential = None
    save_credentials(path, creds)
    return creds


async def register_agent(
    path: Path, state_dir: Path | None, options: dict[str, Any]
) -> dict[str, Any]:
    """``POST /v1/agents`` with a key proof; stores the agent and key ids on success."""
    creds = load_credentials(path)
    key = creds.signing_key()
    if not creds.integration_token:
        raise ConfigError("registering needs an integration token; run `agentbus login`")
    address = parse_address(creds.address)
    client = GatewayClient(creds.gateway_url, on_clock_offset=set_server_offset_ms)
    try:
        with suppress(GatewayError):
            await client.healthz()  # learn the clock offset before signing a timed proof
        body = {
            "workspace": address.workspace,
            "name": address.name,
            **{k: v for k, v in options.items() if v is not None},
            "public_key": public_key_b64url(key),
            "host": socket.gethostname(),
            "proof": key_proof(key, creds.address, server_now()),
        }
        answer = await client.register(creds.integration_token, body)
    finally:
        await client.aclose()
    agent, key_info = answer.get("agent") or {}, answer.get("key") or {}
    if agent.get("address") not in (None, creds.address):
        raise SidecarError(f"the gateway registered {agent.get('address')}, not {creds.address}")
    if not isinstance(agent.get("id"), str) or not isinstance(key_info.get("id"), str):
        raise SidecarError("the registration answer has no agent or key id")
    creds.agent_id, creds.key_id = agent["id"], key_info["id"]
    creds.key_expires_at = key_info.get("expires_at")
    creds.agent_credential = None
    save_credentials(path, creds)
    conn = open_store(state_db_path(agent["id"], state_dir))
    try:
        record_identity(conn, creds, key)
        # the registration's answer has just told the gateway's clock: later commands need not ask
        set_meta(conn, OFFSET_KEY, str(server_offset_ms()))
    finally:
        conn.close()
    return answer
