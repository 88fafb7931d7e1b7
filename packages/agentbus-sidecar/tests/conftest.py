"""Fixtures: a registered agent's local files, signed deliveries from another agent, and a
gateway address where nothing listens (the gateway is not part of these tests)."""

from __future__ import annotations

import socket
import sqlite3
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from agentbus_sidecar.credentials import Credentials, save_credentials
from agentbus_sidecar.envelope import MESSAGE, build_envelope, sign_envelope
from agentbus_sidecar.ids import new_id
from agentbus_sidecar.keys import generate_key, private_key_pem, public_key_b64url
from agentbus_sidecar.store import open_store, state_db_path
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

ME = "agent://acme/platform/planner"
PEER = "agent://acme/platform/reviewer"
TOKEN = "ab_test_" + "Q7" * 20


@pytest.fixture
def dead_gateway() -> str:
    """An http URL on loopback where nothing listens: connections are refused at once."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"


@dataclass
class Agent:
    creds_path: Path
    state_dir: Path
    creds: Credentials
    key: Ed25519PrivateKey

    @property
    def db_path(self) -> Path:
        assert self.creds.agent_id is not None
        return state_db_path(self.creds.agent_id, self.state_dir)


@pytest.fixture
def agent(tmp_path: Path, dead_gateway: str, monkeypatch: pytest.MonkeyPatch) -> Agent:
    """Credentials of an agent registered earlier (ids as the gateway would have given)."""
    key = generate_key()
    creds = Credentials(
        gateway_url=dead_gateway,
        address=ME,
        private_key=private_key_pem(key),
        integration_token=TOKEN,
        agent_id=new_id("agt"),
        key_id=new_id("key"),
    )
    path = tmp_path / "config" / "agentbus" / "credentials.json"
    save_credentials(path, creds)
    monkeypatch.setenv("AGENTBUS_CREDENTIALS", str(path))
    monkeypatch.setenv("AGENTBUS_STATE_DIR", str(tmp_path / "state"))
    return Agent(path, tmp_path / "state", creds, key)


@pytest.fixture
def db(tmp_path: Path) -> Iterator[sqlite3.Connection]:
    conn = open_store(tmp_path / "state.db")
    yield conn
    conn.close()


@dataclass
class Peer:
    address: str
    key: Ed25519PrivateKey
    key_id: str


@pytest.fixture
def peer() -> Peer:
    return Peer(PEER, generate_key(), new_id("key"))


DeliveryFactory = Callable[..., dict[str, Any]]


@pytest.fixture
def make_delivery(peer: Peer) -> DeliveryFactory:
    """A delivery as ``GET /v1/inbox`` hands it out: a signed envelope from ``peer`` to us."""

    def make(
        *, seq: int = 1, attempt: int = 1, token: str | None = None, to: str = ME, **attrs: Any
    ) -> dict[str, Any]:
        attrs.setdefault("type", MESSAGE)
        attrs.setdefault("data", {"text": f"message {seq}"})
        envelope = sign_envelope(
            build_envelope(source=peer.address, recipient=to, key_id=peer.key_id, **attrs),
            peer.key,
        )
        return {
            "msg_id": envelope["id"],
            "stream_seq": seq,
            "attempt": attempt,
            "ack_token": token or f"tok-{seq}-{attempt}",
            "sender_key": {"id": peer.key_id, "public_key": public_key_b64url(peer.key)},
            "envelope": envelope,
        }

    return make
