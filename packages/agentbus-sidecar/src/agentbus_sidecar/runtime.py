"""What a command or the sidecar loop works with: credentials, state.db, gateway client.

``open_runtime`` loads credentials.json, opens the agent's state.db (creating and migrating
it), restores the server clock offset from ``meta`` (or, with none stored yet, asks the gateway
once before anything is dated) and wires the client so that every response's ``Date`` header
keeps that offset current. A state.db that is new for an agent registered before (the old one
was lost, or the agent moved) is marked for a resync of its inbox (``resync``).
"""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from agentbus_sidecar.client import GatewayClient
from agentbus_sidecar.clock import server_offset_ms, set_server_offset_ms
from agentbus_sidecar.credentials import Credentials, load_credentials, save_credentials
from agentbus_sidecar.errors import ConfigError, GatewayError, GatewayUnreachable
from agentbus_sidecar.keys import fingerprint
from agentbus_sidecar.session import AgentSession
from agentbus_sidecar.store import open_store, state_db_path
from agentbus_sidecar.store.meta import get_meta, set_meta

__all__ = ["RESYNC_KEY", "Runtime", "open_runtime", "record_identity"]

OFFSET_KEY = "server_time_offset_ms"
# set when a registered agent's state.db is new (lost, or moved): its inbox is to be restored
RESYNC_KEY = "resync_pending"
# Date headers have whole seconds; rewriting meta for smaller changes would only record noise.
OFFSET_WRITE_THRESHOLD_MS = 1000
# A state without an offset asks the gateway's clock once; offline, it goes on without it soon.
CLOCK_PROBE_TIMEOUT_S = 2.0


@dataclass
class Runtime:
    creds_path: Path
    creds: Credentials
    key: Ed25519PrivateKey
    conn: sqlite3.Connection
    client: GatewayClient
    session: AgentSession

    @property
    def address(self) -> str:
        return self.creds.address

    @property
    def agent_id(self) -> str:
        assert self.creds.agent_id is not None  # open_runtime requires registration
        return self.creds.agent_id

    @property
    def key_id(self) -> str:
        assert self.creds.key_id is not None
        return self.creds.key_id


def record_identity(conn: sqlite3.Connection, creds: Credentials, key: Ed25519PrivateKey) -> None:
    """Write agent_id, address and key fingerprint into ``meta`` (data model §7)."""
    wanted = {"address": creds.address, "key_fingerprint": fingerprint(key)}
    if creds.agent_id:
        wanted["agent_id"] = creds.agent_id
    for name, value in wanted.items():
        if get_meta(conn, name) != value:
            set_meta(conn, name, value)


@asynccontextmanager
async def open_runtime(creds_path: Path, state_dir: Path | None = None) -> AsyncIterator[Runtime]:
    creds = load_credentials(creds_path)
    key = creds.signing_key()
    if not creds.agent_id or not creds.key_id:
        raise ConfigError("this agent is not registered yet; run `agentbus register`")
    conn = open_store(state_db_path(creds.agent_id, state_dir))
    stored = get_meta(conn, OFFSET_KEY)
    known = stored is not None and stored.lstrip("-").isdigit()
    set_server_offset_ms(int(stored or 0) if known else 0)

    def on_offset(offset_ms: int) -> None:
        nonlocal known
        if not known or abs(offset_ms - server_offset_ms()) >= OFFSET_WRITE_THRESHOLD_MS:
            set_server_offset_ms(offset_ms)
            set_meta(conn, OFFSET_KEY, str(offset_ms))
            known = True

    client = GatewayClient(creds.gateway_url, on_clock_offset=on_offset)
    session = AgentSession(client, creds, lambda c: save_credentials(creds_path, c))
    try:
        if get_meta(conn, "agent_id") is None:  # registered, but this state.db is new
            set_meta(conn, RESYNC_KEY, "1")
        record_identity(conn, creds, key)
        if not known:  # ids and proofs are dated by the gateway's clock: learn it first
            with suppress(GatewayError, GatewayUnreachable):
                await client.healthz(timeout_s=CLOCK_PROBE_TIMEOUT_S)
        yield Runtime(creds_path, creds, key, conn, client, session)
    finally:
        await client.aclose()
        conn.close()
