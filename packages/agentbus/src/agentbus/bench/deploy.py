"""The benchmark's deployment (``agentbus-gateway bench``): PostgreSQL, NATS and one gateway
process, throwaway unless URLs are given; the bench tenant, with its send limits lifted, and
its agents; and, when a run fails, the gateway's last logged errors.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx
import nats
import psycopg
from agentbus_sidecar.keys import generate_key, key_proof, public_key_b64url
from platformkit.db.embedded import EmbeddedPostgres
from platformkit.db.scope import tenant_transaction
from platformkit.http.serve import child_preexec
from platformkit.nats.embedded import EmbeddedNats

from agentbus import db
from agentbus.actions import tenants, workspaces
from agentbus.actions.context import Actor, Ctx
from agentbus.actions.users import OwnerSpec
from agentbus.bench.cpu import CpuMeter
from agentbus.broker import stream_name
from agentbus.keys import load_or_create_keyring
from agentbus.store import plans

UNLIMITED = {"publish_per_minute": 10**9, "pending_per_agent": 10**9, "agents": 10**6}
SLUG = "bench"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@dataclass
class Agent:
    address: str
    key: Any
    key_id: str = ""
    credential: str = ""


@dataclass
class Deployment:
    """PostgreSQL, NATS and one gateway process, all throwaway unless URLs were given. On
    servers that were given, the bench creates its own database and its tenant's stream, and
    removes both when it stops."""

    root: Path
    database_url: str | None
    nats_url: str | None
    workers: int
    inline_payloads: bool = False
    analytics: bool = True
    port: int = field(default_factory=free_port)
    postgres: EmbeddedPostgres | None = None
    nats_server: EmbeddedNats | None = None
    process: subprocess.Popen[bytes] | None = None
    server_url: str | None = None  # where the bench database was created
    tenant_id: uuid.UUID | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start_services(self) -> None:
        if self.nats_url is None:
            self.nats_server = EmbeddedNats(store_dir=self.root / "nats", port=free_port())
            self.nats_url = self.nats_server.start()
        self.server_url = self.database_url
        if self.server_url is None:
            self.postgres = EmbeddedPostgres(data_dir=self.root / "pg", port=free_port())
            self.server_url = self.postgres.start()
        name = f"agentbus_bench_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(self.server_url, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')  # name is ours, not input
        self.database_url = urlunsplit(urlsplit(self.server_url)._replace(path=f"/{name}"))

    def gateway_environment(self) -> dict[str, str]:
        """The gateway's environment: this deployment's servers and config directory, its
        payloads inline or not, analytics (chDB under the config directory) on or off, and no
        request rates (a receiver that polls and reads for each few messages makes more than
        the 3,000 requests a minute of 04 §1.6 in a run of a minute). The rest comes from this
        process's environment (``AGENTBUS_OBJECT_STORE_URL`` and the AWS variables put the
        payloads in S3)."""
        if self.database_url is None or self.nats_url is None:
            raise RuntimeError("start_services first")
        return {
            **os.environ,
            "AGENTBUS_DATABASE_URL": self.database_url,
            "AGENTBUS_NATS_URL": self.nats_url,
            "AGENTBUS_CONFIG_DIR": str(self.root / "config"),
            "AGENTBUS_REQUEST_RATE_LIMITS": "false",
            "AGENTBUS_INLINE_PAYLOADS": str(self.inline_payloads).lower(),
            "AGENTBUS_ANALYTICS": str(self.analytics).lower(),
        }

    def start_gateway(self) -> None:
        env = self.gateway_environment()
        command = [sys.executable, "-m", "agentbus.cli", "serve", "--port", str(self.port)]
        command += ["--workers", str(self.workers)]
        with (self.root / "gateway.log").open("wb") as log:
            self.process = subprocess.Popen(  # noqa: S603 - our own interpreter and module
                command,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=child_preexec(),  # a killed bench takes its gateway with it
            )
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError((self.root / "gateway.log").read_text()[-3000:])
            with suppress(httpx.TransportError):
                if httpx.get(f"{self.url}/readyz", timeout=2).status_code == 200:
                    return
            time.sleep(0.2)
        raise RuntimeError("the gateway did not become ready in 90 s")

    def meter(self) -> CpuMeter:
        """CPU of the gateway, and of PostgreSQL and NATS when this deployment started them."""
        postgres = None
        if self.postgres is not None:
            with suppress(OSError, ValueError):
                pid_file = self.postgres.data_dir / "postmaster.pid"
                postgres = int(pid_file.read_text().split()[0])
        nats_pid = self.nats_server.running_pid() if self.nats_server is not None else None
        gateway = self.process.pid if self.process is not None else None
        return CpuMeter({"gateway": gateway, "postgres": postgres, "nats": nats_pid})

    def stop(self) -> None:
        self._stop_gateway()
        if self.nats_server is not None:
            self.nats_server.stop()
        elif self.nats_url is not None and self.tenant_id is not None:
            asyncio.run(_delete_stream(self.nats_url, stream_name(self.tenant_id)))
        if self.postgres is not None:
            self.postgres.stop()
        elif self.server_url is not None and self.database_url is not None:
            name = urlsplit(self.database_url).path.lstrip("/")
            with psycopg.connect(self.server_url, autocommit=True) as conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')  # ours, as above

    def _stop_gateway(self) -> None:
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                # a second SIGTERM makes serve kill granian and its workers at once
                os.killpg(self.process.pid, signal.SIGTERM)
                try:
                    self.process.wait(5)
                except subprocess.TimeoutExpired:
                    os.killpg(self.process.pid, signal.SIGKILL)
                    self.process.wait()


async def _delete_stream(nats_url: str, name: str) -> None:
    nc = await nats.connect(nats_url)
    try:
        with suppress(nats.js.errors.NotFoundError):
            await nc.jetstream().delete_stream(name)
    finally:
        await nc.close()


async def make_tenant(database_url: str, keyring: Path) -> tuple[uuid.UUID, str]:
    """Migrate, then a tenant and workspace; returns the tenant's id and bootstrap integration
    token. The
    tenant's send rate, backlog and agent count limits are lifted (still checked on every send
    and registration), since the load is the point here."""
    await db.migrator().migrate(database_url)
    pool = await db.open_app_pool(database_url, max_size=2)
    try:
        operator = Ctx(pool, Actor.operator("cli:bench"), keyring=load_or_create_keyring(keyring))
        owner = OwnerSpec(f"owner@{SLUG}.example", "oidc:bench", f"{SLUG}-owner")
        created = await tenants.create_tenant(
            operator, slug=SLUG, display_name="Bench", owner=owner
        )
        if created.owner_user is None or created.bootstrap_token is None:
            raise RuntimeError("the tenant was created without an owner or token")
        tid = created.tenant["id"]
        async with tenant_transaction(pool, db.SCOPE, tid) as conn:
            await plans.override_limits(conn, tid, UNLIMITED)
        as_owner = Ctx(pool, Actor.user(tid, created.owner_user["id"]))
        await workspaces.create_workspace(as_owner, tid, slug="main", display_name="main")
        return tid, created.bootstrap_token.plaintext
    finally:
        await pool.close()


async def enroll(client: httpx.AsyncClient, token: str, name: str, tenant: str = SLUG) -> Agent:
    """Register ``name`` in workspace ``main`` of ``tenant`` and issue its credential."""
    agent = Agent(f"agent://{tenant}/main/{name}", generate_key())
    bearer = {"Authorization": f"Bearer {token}"}
    body = {"workspace": "main", "name": name, "public_key": public_key_b64url(agent.key),
            "proof": key_proof(agent.key, agent.address, datetime.now(UTC))}  # fmt: skip
    reply = await client.post("/v1/agents", json=body, headers=bearer)
    reply.raise_for_status()
    agent_id, agent.key_id = reply.json()["agent"]["id"], reply.json()["key"]["id"]
    proof = key_proof(agent.key, agent_id, datetime.now(UTC), kid=agent.key_id)
    issued = await client.post(
        f"/v1/agents/{agent_id}/credentials", json={"proof": proof}, headers=bearer
    )
    issued.raise_for_status()
    agent.credential = issued.json()["access_token"]
    return agent


@contextmanager
def workdir() -> Iterator[Path]:
    root = Path(tempfile.mkdtemp(prefix="agentbus-bench-"))
    try:
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


def gateway_errors(log: Path, last: int = 3) -> list[str]:
    """The last ``last`` distinct errors of the gateway's JSON log, each with the exception
    that ended its traceback: what a failed run shows before its throwaway directory goes."""
    if not log.exists():
        return []
    found: dict[str, None] = {}
    for line in log.read_text(errors="replace").splitlines():
        with suppress(ValueError):
            entry = json.loads(line)
            if isinstance(entry, dict) and entry.get("level") in ("error", "critical"):
                text = " | ".join(filter(None, [str(entry.get("msg", "")), _raised(entry)]))
                found.pop(text, None)
                found[text] = None
    return list(found)[-last:]


def _raised(entry: dict[str, Any]) -> str:
    """A logged traceback's last exception line (``Type: message``), with the message's own
    continuation lines."""
    lines = str(entry.get("exc", "")).rstrip().splitlines()
    start = max((i for i, t in enumerate(lines) if t and not t[0].isspace()), default=len(lines))
    return " ".join(t.strip() for t in lines[start:] if t.strip())
