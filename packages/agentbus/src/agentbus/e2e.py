"""The end-to-end world: the real ``agentbus-gateway serve`` process (its own database, config
folder and port, on a NATS server the test starts and stops) and two real sidecars, ``alice``
and ``bob``, each with its own credentials and state folder made by ``agentbus init`` and
``agentbus register``; and the probes the end-to-end tests share. Tests open it with
``open_world``, or share one stack (``open_stack``) between pairs of agents of their own
(``open_pair``) when they leave the stack as they found it (docs/agentbus/testing.md)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import psycopg
from agentbus_sidecar.actions.sending import send_message
from agentbus_sidecar.actions.setup import init_credentials, register_agent
from agentbus_sidecar.clock import utcnow
from agentbus_sidecar.runtime import Runtime
from agentbus_sidecar.store import inbox, outbox
from agentbus_sidecar.sync import flush
from platformkit.db.scope import Pool, tenant_transaction
from platformkit.nats.embedded import EmbeddedNats
from platformkit.testing.services import free_port

from agentbus import db
from agentbus.actions import tenants, workspaces
from agentbus.actions.context import Actor, Ctx
from agentbus.actions.users import OwnerSpec
from agentbus.delivery.sweeper import Sweeper
from agentbus.keys import load_or_create_keyring
from agentbus.store import plans

BIN = Path(sys.executable).parent
TENANT, WORKSPACE = "acme", "main"


async def until[T](
    probe: Callable[[], Awaitable[T | None]], within: float, what: str, every: float = 0.2
) -> T:
    """Poll ``probe`` until it returns something truthy; fail after ``within`` seconds."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while True:
        value = await probe()
        if value:
            return value
        if loop.time() > deadline:
            raise AssertionError(f"timed out after {within} s waiting for {what}")
        await asyncio.sleep(every)


async def stop_process(process: asyncio.subprocess.Process, sig: int = signal.SIGTERM) -> None:
    """Signal the process group (granian has worker processes) and wait for the leader."""
    if process.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, sig)
        try:
            await asyncio.wait_for(process.wait(), 20)
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            await process.wait()
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)  # stragglers of a SIGTERM'd group


@dataclass
class Stack:
    """A gateway process on its own database and config folder, and a NATS we control."""

    root: Path
    database_url: str
    nats: EmbeddedNats
    port: int = field(default_factory=free_port)
    workers: int = 1
    process: asyncio.subprocess.Process | None = None
    starts: int = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def config_dir(self) -> Path:
        return self.root / "config"

    def log(self) -> str:
        return "\n".join(
            p.read_text(errors="replace")[-3000:] for p in sorted(self.root.glob("gateway-*.log"))
        )

    async def start_gateway(self) -> None:
        self.starts += 1
        env = {
            **os.environ,
            "AGENTBUS_DATABASE_URL": self.database_url,
            "AGENTBUS_NATS_URL": self.nats.url,
            "AGENTBUS_CONFIG_DIR": str(self.config_dir),
            "AGENTBUS_RECONCILE_INTERVAL_S": "1",
            "AGENTBUS_RECONCILE_MIN_AGE_S": "1",
        }
        with (self.root / f"gateway-{self.starts}.log").open("wb") as log:
            self.process = await asyncio.create_subprocess_exec(
                str(BIN / "agentbus-gateway"), "serve", "--port", str(self.port),
                "--workers", str(self.workers),
                env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
            )  # fmt: skip
        process = self.process
        async with httpx.AsyncClient(base_url=self.url, timeout=2.0) as client:

            async def ready() -> bool:
                assert process.returncode is None, self.log()
                try:
                    return (await client.get("/readyz")).status_code == 200
                except httpx.TransportError:
                    return False

            await until(ready, 60, "the gateway's /readyz", every=0.1)

    async def stop_gateway(self, sig: int = signal.SIGTERM) -> None:
        if self.process is not None:
            await stop_process(self.process, sig)
            self.process = None

    async def make_tenant(self) -> str:
        """Tenant + workspace through the admin actions; returns the bootstrap token."""
        ring = load_or_create_keyring(self.config_dir / "keyring.json")
        async with self.app_pool() as pool:
            operator = Ctx(pool, Actor.operator("cli:e2e"), keyring=ring)
            owner = OwnerSpec(f"owner@{TENANT}.example", "oidc:test", f"{TENANT}-owner")
            # business: the streams of 60+ messages below stay under its 600 sends a minute
            created = await tenants.create_tenant(
                operator, slug=TENANT, display_name="Acme", plan="business", owner=owner
            )
            assert created.owner_user is not None
            assert created.bootstrap_token is not None
            tid = created.tenant["id"]
            as_owner = Ctx(pool, Actor.user(tid, created.owner_user["id"]))
            await workspaces.create_workspace(as_owner, tid, slug=WORKSPACE, display_name=WORKSPACE)
            return created.bootstrap_token.plaintext

    @contextlib.asynccontextmanager
    async def app_pool(self) -> AsyncIterator[Pool]:
        """A small pool on the gateway's database as the application role, closed at the end."""
        pool = await db.open_app_pool(self.database_url, max_size=2)
        try:
            yield pool
        finally:
            await pool.close()

    async def value(self, sql: str, *params: Any) -> Any:
        """The first column of the first row (None without one), as the database owner."""
        async with await psycopg.AsyncConnection.connect(self.database_url) as conn:
            row = await (await conn.execute(sql, params)).fetchone()
            return None if row is None else row[0]

    async def override_limits(self, limits: dict[str, int]) -> None:
        """Plan limits of the tenant, through its subscription's overrides."""
        tenant_id = await self.value("SELECT id FROM tenants WHERE slug = %s", TENANT)
        async with self.app_pool() as pool, tenant_transaction(pool, db.SCOPE, tenant_id) as scoped:
            await plans.override_limits(scoped, tenant_id, limits)

    async def sweep_expired(self) -> int:
        """One pass of the expiry sweep the gateway runs every 60 s; how many it expired."""
        async with self.app_pool() as pool:
            return await Sweeper(pool, None).expire_once()

    async def message_status(self, msg_id: str) -> str | None:
        sql = "SELECT status::text FROM messages WHERE id = %s"
        status: str | None = await self.value(sql, uuid.UUID(hex=msg_id.removeprefix("msg_")))
        return status

    async def agent_status(self, agent_id: str) -> str | None:
        """``agents.status``, which the sidecars' heartbeats set."""
        sql = "SELECT status::text FROM agents WHERE id = %s AND last_seen_at IS NOT NULL"
        status: str | None = await self.value(sql, uuid.UUID(hex=agent_id.removeprefix("agt_")))
        return status


@dataclass
class Sidecar:
    """One agent: credentials.json and a state folder of its own, driven by the real CLI."""

    name: str
    home: Path
    agent_id: str = ""
    process: asyncio.subprocess.Process | None = None
    wrap: tuple[str, ...] = ()
    """A command every ``agentbus`` run goes through (``faketime -f +10m`` for a clock off)."""

    @property
    def address(self) -> str:
        return f"agent://{TENANT}/{WORKSPACE}/{self.name}"

    @property
    def credentials(self) -> Path:
        return self.home / "credentials.json"

    @property
    def state_dir(self) -> Path:
        return self.home / "state"

    @property
    def state_db(self) -> Path:
        return self.state_dir / "agents" / self.agent_id / "state.db"

    @property
    def env(self) -> dict[str, str]:
        return {
            **os.environ,
            "AGENTBUS_CREDENTIALS": str(self.credentials),
            "AGENTBUS_STATE_DIR": str(self.state_dir),
        }

    async def cli(self, *args: str, expect: int = 0) -> dict[str, Any]:
        process = await asyncio.create_subprocess_exec(
            *self.wrap, str(BIN / "agentbus"), *args, "--json", env=self.env,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )  # fmt: skip
        out, err = await asyncio.wait_for(process.communicate(), 60)
        assert process.returncode == expect, f"agentbus {args}: {out.decode()} {err.decode()}"
        answer: dict[str, Any] = json.loads(out) if out.strip() else {}
        return answer

    async def enroll(
        self, gateway_url: str, token: str, *capabilities: str, through_cli: bool = True
    ) -> None:
        """``agentbus init`` and ``agentbus register``; or, ``through_cli=False``, the same two
        actions of the sidecar library in this process, for tests about what comes after
        (each CLI run costs a second of interpreter start)."""
        self.home.mkdir(mode=0o700, parents=True, exist_ok=True)
        if through_cli:
            await self.cli(
                "init", "--gateway", gateway_url, "--address", self.address, "--token", token
            )
            caps = [arg for cap in capabilities for arg in ("--capability", cap)]
            await self.cli("register", *caps)
        else:
            init_credentials(
                self.credentials, gateway_url=gateway_url, address=self.address, token=token
            )
            offered = [{"name": cap, "version": "1", "description": ""} for cap in capabilities]
            await register_agent(self.credentials, self.state_dir, {"capabilities": offered})
        self.agent_id = json.loads(self.credentials.read_text())["agent_id"]

    async def start(self, delivery: str = "websocket") -> None:
        assert self.process is None
        log = (self.home / "sidecar.log").open("ab")
        self.process = await asyncio.create_subprocess_exec(
            *self.wrap, str(BIN / "agentbus"), "sidecar", "run", "--wait", "10",
            "--delivery", delivery, env=self.env,
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
        log.close()

    async def stop(self) -> None:
        if self.process is not None:
            await stop_process(self.process)
            self.process = None

    def log(self) -> str:
        path = self.home / "sidecar.log"
        return path.read_text(errors="replace")[-3000:] if path.exists() else ""

    def query(self, sql: str, *params: Any) -> list[sqlite3.Row]:
        conn = sqlite3.connect(self.state_db, timeout=10)
        conn.row_factory = sqlite3.Row
        try:
            return conn.execute(sql, params).fetchall()
        finally:
            conn.close()

    def received(self, type_: str = "agentbus.message.v1") -> dict[str, sqlite3.Row]:
        rows = self.query("SELECT * FROM inbox WHERE type = ?", type_)
        return {row["msg_id"]: row for row in rows}

    def present_all(self) -> list[str]:
        """What an agent reading its inbox is shown (and marked presented) right now."""
        conn = sqlite3.connect(self.state_db, timeout=10)
        conn.row_factory = sqlite3.Row
        try:
            return [row["msg_id"] for row in inbox.present(conn, utcnow(), limit=100_000)]
        finally:
            conn.close()


@dataclass
class World:
    stack: Stack
    alice: Sidecar
    bob: Sidecar


@contextlib.asynccontextmanager
async def open_stack(
    agentbus_db: str, root: Path, workers: int = 1
) -> AsyncIterator[tuple[Stack, str]]:
    """NATS, the tenant and the gateway (with ``workers`` granian workers); with the tenant's
    bootstrap token. Stopped at the end."""
    nats = EmbeddedNats(store_dir=root / "nats", port=free_port())
    await asyncio.to_thread(nats.start)
    stack = Stack(root, agentbus_db, nats, workers=workers)
    try:
        token = await stack.make_tenant()  # creates the keyring the gateway will load
        await stack.start_gateway()
        yield stack, token
    finally:
        await stack.stop_gateway()
        await asyncio.to_thread(nats.stop)


@contextlib.asynccontextmanager
async def open_pair(stack: Stack, token: str, root: Path, suffix: str = "") -> AsyncIterator[World]:
    """``alice<suffix>`` and ``bob<suffix>`` (who offers code.review), enrolled through the
    sidecar library in folders under ``root``; their sidecars are stopped at the end."""
    alice = Sidecar(f"alice{suffix}", root / f"alice{suffix}")
    bob = Sidecar(f"bob{suffix}", root / f"bob{suffix}")
    try:
        await asyncio.gather(
            alice.enroll(stack.url, token, through_cli=False),
            bob.enroll(stack.url, token, "code.review", through_cli=False),
        )
        yield World(stack, alice, bob)
    finally:
        for sidecar in (alice, bob):
            await sidecar.stop()


@contextlib.asynccontextmanager
async def open_world(agentbus_db: str, tmp_path: Path) -> AsyncIterator[World]:
    """A stack of its own and the two enrolled agents; all stopped at the end."""
    async with (
        open_stack(agentbus_db, tmp_path) as (stack, token),
        open_pair(stack, token, tmp_path) as world,
    ):
        yield world


async def wait_received(
    sidecar: Sidecar, expected: set[str], within: float, stack: Stack
) -> dict[str, sqlite3.Row]:
    """Until every expected id sits in the inbox with its transport ack confirmed."""

    async def probe() -> dict[str, sqlite3.Row] | None:
        rows = sidecar.received()
        done = {k: r for k, r in rows.items() if k in expected and r["transport_acked"]}
        return rows if len(done) == len(expected) else None

    try:
        return await until(probe, within, f"{len(expected)} messages at {sidecar.name}")
    except AssertionError:
        have = sidecar.received()
        raise AssertionError(
            f"{len(have)}/{len(expected)} received; missing {sorted(expected - set(have))[:5]}\n"
            f"sidecar log:\n{sidecar.log()}\ngateway log:\n{stack.log()}"
        ) from None


def assert_exactly_once(sidecar: Sidecar, sent: list[str]) -> None:
    rows = sidecar.received()
    assert len(sent) == len(set(sent))
    assert set(rows) == set(sent), "the inbox holds exactly the sent ids"
    first, second = sidecar.present_all(), sidecar.present_all()
    assert sorted(first) == sorted(sent), "every message is presented"
    assert second == [], "and none twice"


async def drain_outbox(rt: Runtime, within: float) -> None:
    """What the sidecar loop's flusher does: retry queued sends until none is left."""

    async def empty() -> bool:
        await flush(rt, drain=True)
        return not outbox.pending_sends(rt.conn)

    await until(empty, within, "the sender's outbox to empty", every=0.5)


async def send_stream(
    rt: Runtime, to: str, count: int, *, at: int, fault: Callable[[], Coroutine[Any, Any, None]]
) -> list[str]:
    """Send ``count`` messages one by one; start ``fault`` after message ``at``. At least a
    few sends start while the fault is in progress (the stream is stretched if need be)."""
    sent: list[str] = []
    chaos: asyncio.Task[None] | None = None
    during = 0
    while len(sent) < count or (chaos is not None and not chaos.done() and during < 5):
        overlaps = chaos is not None and not chaos.done()
        outcome = await send_message(rt, to, {"text": f"message {len(sent)}"})
        assert outcome.state in {"sent", "queued"}, outcome.as_dict()
        sent.append(outcome.envelope["id"])
        # A send that starts while the fault is in progress may wait out the whole fault.
        during += overlaps
        if len(sent) == at:
            chaos = asyncio.create_task(fault())
        await asyncio.sleep(0.02)
    assert chaos is not None
    await chaos
    assert during > 0, "the fault happened mid-stream"
    return sent
