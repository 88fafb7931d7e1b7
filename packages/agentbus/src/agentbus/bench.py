"""``agentbus-gateway bench``: end-to-end latency and throughput of the gateway, and the same
workload over raw NATS JetStream as the ceiling.

The gateway runs as its own process (``agentbus-gateway serve``) on a throwaway PostgreSQL and
NATS unless URLs are given (on given servers it creates its own database and tenant, and removes
the database and the tenant's stream at the end). A lane is two agents registered with sidecar
keys (``--lanes``, default one; message ``n`` travels in lane ``n % lanes``). A lane's sending
client signs envelopes with the sidecar's envelope module and flushes them as a sidecar flushes
its outbox: the messages of the lane queued so far, up to 100, in one
``POST /v1/messages/batch``, with one request in flight (the next batch of a lane waits for the
answer to the previous one). Its receiving client long-polls ``GET /v1/inbox`` and
application-acks each pulled batch with ``POST /v1/inbox/read`` (which records the transport
ack too); with ``--delivery websocket`` it holds the delivery WebSocket instead, as
``agentbus sidecar run`` does by default, and application-acks the deliveries that arrived
together with one ``read`` frame on the socket (so the worker that handed them out also acks
them in JetStream, as it does for the sidecar's frames), granting their credit again after the
``result``. A message's latency runs from the moment it is queued to the answer of the read
that acked it. Both clients are the
lean keep-alive HTTP/1.1 client of ``benchhttp``, in this process. Envelopes are built and
signed before a run starts (a sidecar signs when it queues, not when it sends), so the client's
share of the CPU is the HTTP traffic.

The raw run publishes envelopes of the same size with ``Nats-Msg-Id`` to a file-backed stream,
pulls them with a durable pull consumer and acks each with a confirmed ack.

The first line says how steady the machine's CPU is (``benchhost``): on a shared virtual
machine the host may slow the guest for a tenth of a second at a time, which every run's p99
then includes. Each run prints one JSON object per line, with the CPU time its messages cost
per process (``cpu_ms_per_msg``: gateway, PostgreSQL, NATS, this client; ``benchcpu``), which
stays meaningful when other work shares the machine and the wall-clock figures do not. With
``--lone-rounds N`` a line for messages sent one at a time comes before the runs, with each
request's CPU per service (``benchlone``). Then one line per mode puts the gateway beside the
raw JetStream ceiling, and the last line compares the gateway runs with the goals (p50 < 5 ms
and p99 < 25 ms at the paced rate, >= 2000 msg/s unpaced). A run that fails ends with its
first failure and, on standard error, the gateway's last logged errors (``gateway_errors``),
since the gateway's log goes with the throwaway directory.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Coroutine, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx
import nats
import psycopg
from agentbus_sidecar.envelope import build_envelope, sign_envelope
from agentbus_sidecar.keys import generate_key, key_proof, public_key_b64url
from agentbus_sidecar.push import CREDIT, DeliverySocket, open_socket
from agentbus_sidecar.sync import DELIVERIES, LONG_POLL, PUSH
from nats.js.api import AckPolicy, ConsumerConfig, StorageType, StreamConfig
from platformkit.db.embedded import EmbeddedPostgres
from platformkit.db.scope import tenant_transaction
from platformkit.http.serve import child_preexec
from platformkit.nats.embedded import EmbeddedNats
from websockets.asyncio.client import ClientConnection
from wirekit import canonical_json

from agentbus import benchhost, benchhttp, db
from agentbus.actions import tenants, workspaces
from agentbus.actions.context import Actor, Ctx
from agentbus.actions.users import OwnerSpec
from agentbus.benchcpu import CpuMeter
from agentbus.benchlone import batch_body, lone_rounds, percentile, read_all
from agentbus.broker import stream_name
from agentbus.keys import load_or_create_keyring
from agentbus.store import plans

GOAL_P50_MS, GOAL_P99_MS, GOAL_MSGS_PER_SEC = 5.0, 25.0, 2000.0
UNLIMITED = {"publish_per_minute": 10**9, "pending_per_agent": 10**9}
UNPACED_IN_FLIGHT = 32
HOST_PROBE_S = 5.0
BATCH_MAX = 100
SLUG = "bench"
Emit = Callable[[dict[str, Any]], None]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@dataclass
class Result:
    bench: str
    mode: str
    messages: int
    rate: float | None
    latencies_ms: list[float] = field(default_factory=list)
    # of the acked messages, from queued: to the send's answer (gateway runs), to the receiver
    accepted_ms: list[float] = field(default_factory=list)
    delivered_ms: list[float] = field(default_factory=list)
    elapsed_s: float = 0.0
    errors: int = 0
    cpu_ms_per_msg: dict[str, float] | None = None
    delivery: str | None = None  # of a gateway run, with its gateway's workers and its lanes
    workers: int | None = None
    lanes: int | None = None
    payloads: str | None = None  # the gateway's setting: inline or store
    payload_opens: dict[str, int] | None = None  # what the gateway's metric counted, by source

    def measure(self, meter: CpuMeter, before: dict[str, float]) -> None:
        self.cpu_ms_per_msg = meter.per_message(before, meter.take(), len(self.latencies_ms))

    def summary(self) -> dict[str, Any]:
        lat = sorted(self.latencies_ms)
        stages = {"accepted": sorted(self.accepted_ms), "delivered": sorted(self.delivered_ms)}

        return {
            "bench": self.bench,
            "mode": self.mode,
            **(
                {}
                if self.delivery is None
                else {
                    "delivery": self.delivery,
                    "workers": self.workers,
                    "lanes": self.lanes,
                    "payloads": self.payloads,
                    "payload_opens": self.payload_opens,
                }
            ),
            "rate": self.rate,
            "messages": self.messages,
            "acked": len(lat),
            "errors": self.errors,
            "msgs_per_sec": round(len(lat) / self.elapsed_s, 1) if self.elapsed_s else None,
            "p50_ms": percentile(lat, 0.50),
            "p99_ms": percentile(lat, 0.99),
            "max_ms": round(lat[-1], 3) if lat else None,
            "mean_ms": round(statistics.fmean(lat), 3) if lat else None,
            **{
                f"{stage}_{name}_ms": percentile(times, p)
                for stage, times in stages.items()
                if times
                for name, p in (("p50", 0.50), ("p99", 0.99))
            },
            "cpu_ms_per_msg": self.cpu_ms_per_msg,
        }


@dataclass(frozen=True)
class Workload:
    messages: int  # per run
    rate: float  # of the paced run, per second
    warmup: int  # unmeasured messages first
    lanes: int  # sending and receiving agent pairs
    raw: bool  # also the same workload over raw JetStream
    lone_rounds: int = 0  # messages one at a time first, for each request's CPU (benchlone)
    delivery: str = LONG_POLL  # how the receiving clients get their messages


async def drive(
    count: int,
    rate: float | None,
    send: Callable[[int], Coroutine[Any, Any, None]],
    *,
    in_flight: int,
) -> None:
    """Call ``send(i)`` for every i: at ``rate`` per second on a fixed schedule (a late send does
    not delay the next ones), or as fast as ``in_flight`` concurrent senders go."""
    if rate is None:
        counter = iter(range(count))

        async def worker() -> None:
            for i in counter:
                await send(i)

        await asyncio.gather(*(worker() for _ in range(in_flight)))
        return
    loop = asyncio.get_running_loop()
    start, tasks = loop.time(), list[asyncio.Task[None]]()
    for i in range(count):
        delay = start + i / rate - loop.time()
        if delay > 0:
            await asyncio.sleep(delay)
        tasks.append(asyncio.create_task(send(i)))
    await asyncio.gather(*tasks)


# -- the gateway ----------------------------------------------------------------------------


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
        payloads inline or not, and no request rates (a receiver that polls and reads for each
        few messages makes more than the 3,000 requests a minute of 04 §1.6 in a run of a
        minute). The rest comes from this process's environment (``AGENTBUS_OBJECT_STORE_URL``
        and the AWS variables put the payloads in S3)."""
        if self.database_url is None or self.nats_url is None:
            raise RuntimeError("start_services first")
        return {
            **os.environ,
            "AGENTBUS_DATABASE_URL": self.database_url,
            "AGENTBUS_NATS_URL": self.nats_url,
            "AGENTBUS_CONFIG_DIR": str(self.root / "config"),
            "AGENTBUS_REQUEST_RATE_LIMITS": "false",
            "AGENTBUS_INLINE_PAYLOADS": str(self.inline_payloads).lower(),
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
    tenant's send rate and backlog limits are lifted (still checked on every send), since the
    load is the point here."""
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


def _bearer(agent: Agent) -> dict[str, str]:
    return {"Authorization": f"Bearer {agent.credential}"}


def _ok(status: int, body: dict[str, Any]) -> dict[str, Any]:
    if status != 200:
        raise benchhttp.HttpError(f"{status}: {body}")
    return body


class Lane:
    """One sending agent and one receiving agent, each with its own connection."""

    def __init__(self, url: str, sender: Agent, receiver: Agent) -> None:
        self.url = url
        self.send_client = benchhttp.Client(url, 1, _bearer(sender))
        self.recv_client = benchhttp.Client(url, 1, _bearer(receiver))
        self.sender, self.receiver = sender, receiver
        self.conversation: str | None = None

    async def aclose(self) -> None:
        await self.send_client.aclose()
        await self.recv_client.aclose()

    def envelope(self, n: int) -> bytes:
        env = build_envelope(
            type="agentbus.message.v1", source=self.sender.address,
            recipient=self.receiver.address, data={"text": f"bench message {n}"},
            key_id=self.sender.key_id, conversation=self.conversation,
        )  # fmt: skip
        self.conversation = self.conversation or env["conversation"]
        return canonical_json(sign_envelope(env, self.sender.key))


class Run:
    """One run over the lanes: message ``n`` travels in lane ``n % len(lanes)``."""

    def __init__(self, lanes: list[Lane], result: Result) -> None:
        self.lanes, self.result = lanes, result
        self.bodies = [lanes[n % len(lanes)].envelope(n) for n in range(result.messages)]
        self.ids = [json.loads(body)["id"] for body in self.bodies]
        self.sent_at: dict[str, float] = {}
        self.accepted_at: dict[str, float] = {}
        self.delivered_at: dict[str, float] = {}
        self.remaining = result.messages
        self.done = asyncio.Event()
        self.queued: list[list[int]] = [[] for _ in lanes]
        self.wake = [asyncio.Event() for _ in lanes]

    def _settled(self) -> None:
        self.remaining -= 1
        if self.remaining <= 0:
            self.done.set()

    async def send(self, n: int) -> None:
        """The agent hands the message to its sidecar, which queues it in the outbox."""
        self.sent_at[self.ids[n]] = time.perf_counter()
        lane = n % len(self.lanes)
        self.queued[lane].append(n)
        self.wake[lane].set()

    async def flush(self, lane: int) -> None:
        """The sidecar's flush of the lane: everything queued, up to a batch, one request in
        flight (a lane's next batch waits for the answer to the previous one)."""
        client, queued, wake = self.lanes[lane].send_client, self.queued[lane], self.wake[lane]
        while self.remaining > 0:
            await wake.wait()
            wake.clear()
            while queued:
                batch, queued[:] = queued[:BATCH_MAX], queued[BATCH_MAX:]
                body = batch_body(self.bodies[n] for n in batch)
                status, content = await client.request(
                    "POST", "/v1/messages/batch", body, "application/json"
                )
                answer = json.loads(content) if status == 200 else {}
                results = answer.get("results") or [{}] * len(batch)
                now = time.perf_counter()
                for n, item in zip(batch, results, strict=True):
                    self.accepted_at[self.ids[n]] = now
                    if item.get("status") not in (200, 202):
                        self.result.errors += 1
                        self.sent_at.pop(self.ids[n], None)
                        self._settled()

    async def receive(self, lane: int) -> None:
        client = self.lanes[lane].recv_client
        while self.remaining > 0:
            pulled = _ok(*await client.json("GET", "/v1/inbox?wait_s=2&max=100"))
            deliveries = pulled.get("deliveries") or []
            self._arrived(deliveries)
            if deliveries:
                answer = _ok(*await client.json("POST", "/v1/inbox/read", read_all(deliveries)))
                self._read(answer.get("results", []))

    async def receive_pushed(self, lane: int, ws: ClientConnection) -> None:
        """The receiver on the delivery WebSocket (``ws``, credit granted): what arrived
        together is read together with a ``read`` frame on the socket, as the sidecar settles
        (on the worker that handed the copies out, which acks them in JetStream with the
        read), and its credit granted again."""
        this = self.lanes[lane]
        frames: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue()
        socket = DeliverySocket(ws, this.receiver.credential, this.url)
        reading = asyncio.create_task(socket.read(frames))
        try:
            while self.remaining > 0:
                batch = [await frames.get()]
                while not frames.empty():
                    batch.append(frames.get_nowait())
                if None in batch:
                    raise benchhttp.HttpError(f"the delivery WebSocket closed ({ws.close_code})")
                deliveries = [f for f in batch if f is not None and f.get("type") == "delivery"]
                self._arrived(deliveries)
                if deliveries:
                    reads = read_all(deliveries)["reads"]
                    self._read(await socket.settle("read", reads))
                    await ws.send(json.dumps({"type": "credit", "n": len(deliveries)}))
        finally:
            reading.cancel()

    def _arrived(self, deliveries: list[dict[str, Any]]) -> None:
        now = time.perf_counter()
        for delivery in deliveries:
            self.delivered_at.setdefault(str(delivery.get("msg_id")), now)

    def _read(self, results: list[dict[str, Any]]) -> None:
        """The answer to the application ack of some deliveries: their latencies end now."""
        now = time.perf_counter()
        for item in results:
            msg_id = str(item.get("msg_id"))
            started = self.sent_at.pop(msg_id, None)
            if started is None:
                continue
            if item.get("result") == "ok":
                self.result.latencies_ms.append((now - started) * 1000)
                for stamps, times in ((self.accepted_at, self.result.accepted_ms),
                                      (self.delivered_at, self.result.delivered_ms)):  # fmt: skip
                    if (at := stamps.get(msg_id)) is not None:
                        times.append((at - started) * 1000)
            else:
                self.result.errors += 1
            self._settled()


class GatewayBench:
    def __init__(
        self,
        lanes: list[Lane],
        meter: CpuMeter,
        delivery: str = LONG_POLL,
        workers: int = 1,
        payloads: str = "store",
    ) -> None:
        self.lanes, self.meter, self.delivery, self.workers = lanes, meter, delivery, workers
        self.payloads = payloads

    async def aclose(self) -> None:
        for lane in self.lanes:
            await lane.aclose()

    async def run(self, result: Result) -> Result:
        """One run; with WebSocket delivery each lane's receiver connects and grants credit
        before the clock starts, and closes after the run (a long-poll of the same agent, as
        the lone rounds make, would replace a socket left open)."""
        result.delivery, result.workers, result.lanes = self.delivery, self.workers, len(self.lanes)
        result.payloads = self.payloads
        sockets: list[ClientConnection] = []
        try:
            if self.delivery == PUSH:
                for lane in self.lanes:
                    sockets.append(await open_socket(lane.url, lane.receiver.credential))
                    await sockets[-1].send(json.dumps({"type": "credit", "n": CREDIT}))
            return await self._run(result, sockets)
        finally:
            for ws in sockets:
                with suppress(Exception):
                    await ws.close()

    async def _run(self, result: Result, sockets: list[ClientConnection]) -> Result:
        run = Run(self.lanes, result)
        if sockets:
            receivers = [run.receive_pushed(i, ws) for i, ws in enumerate(sockets)]
        else:
            receivers = [run.receive(i) for i in range(len(self.lanes))]
        workers = [asyncio.create_task(job) for job in receivers]
        workers += [asyncio.create_task(run.flush(i)) for i in range(len(self.lanes))]
        opened = await payload_opens(self.lanes[0].url)
        cpu = self.meter.take()
        begin = time.perf_counter()
        try:
            await drive(result.messages, result.rate, run.send, in_flight=1)
            await _until(run.done, workers, limit_s=120)
            result.elapsed_s = time.perf_counter() - begin
            result.measure(self.meter, cpu)
            after = await payload_opens(self.lanes[0].url)
            result.payload_opens = {k: int(after.get(k, 0) - opened.get(k, 0)) for k in after}
        finally:
            for worker in workers:
                worker.cancel()
            # Every worker's end is collected here; ``_until`` raised the first failure.
            await asyncio.gather(*workers, return_exceptions=True)
        return result


async def payload_opens(url: str) -> dict[str, float]:
    """``agentbus_payload_opens_total`` by source, from the gateway's ``/metrics``."""
    async with httpx.AsyncClient(base_url=url, timeout=10) as client:
        text = (await client.get("/metrics")).raise_for_status().text
    opens = {"inline": 0.0, "store": 0.0}
    for line in text.splitlines():
        if line.startswith('agentbus_payload_opens_total{source="'):
            labels, value = line.rsplit(" ", 1)
            opens[labels.split('"')[1]] = float(value)
    return opens


async def _until(done: asyncio.Event, workers: list[asyncio.Task[None]], limit_s: float) -> None:
    """Wait for ``done``; a worker that fails meanwhile fails the run at once, with its own
    error, rather than leaving it to wait out the limit."""
    finished = asyncio.create_task(done.wait())
    try:
        await asyncio.wait([finished, *workers], timeout=limit_s, return_when="FIRST_COMPLETED")
    finally:
        finished.cancel()
    for worker in workers:
        if worker.done() and not worker.cancelled() and worker.exception() is not None:
            raise RuntimeError("a benchmark client failed") from worker.exception()
    if not done.is_set():
        raise TimeoutError(f"the run did not finish in {limit_s:g} s")


# -- raw JetStream --------------------------------------------------------------------------


async def raw_nats(nats_url: str, result: Result, payload: bytes, meter: CpuMeter) -> Result:
    nc = await nats.connect(nats_url)
    js = nc.jetstream()
    tag = uuid.uuid4().hex[:12]
    stream, subject = f"BENCH_{tag}", f"bench.{tag}.inbox"
    await js.add_stream(StreamConfig(name=stream, subjects=[subject], storage=StorageType.FILE))
    consumer = ConsumerConfig(durable_name="reader", ack_policy=AckPolicy.EXPLICIT,
                              max_ack_pending=1000, ack_wait=30)  # fmt: skip
    sub = await js.pull_subscribe(subject, durable="reader", stream=stream, config=consumer)
    sent_at: dict[str, float] = {}
    remaining = result.messages

    async def send(n: int) -> None:
        msg_id = f"{tag}-{n}"
        sent_at[msg_id] = time.perf_counter()
        await js.publish(subject, payload, headers={"Nats-Msg-Id": msg_id})

    async def receive() -> None:
        nonlocal remaining
        while remaining > 0:
            try:
                batch = await sub.fetch(100, timeout=2)
            except nats.errors.TimeoutError:
                continue
            arrived = time.perf_counter()
            await asyncio.gather(*(m.ack_sync() for m in batch))
            now = time.perf_counter()
            for m in batch:
                started = sent_at.pop((m.headers or {}).get("Nats-Msg-Id", ""), None)
                if started is not None:
                    result.latencies_ms.append((now - started) * 1000)
                    result.delivered_ms.append((arrived - started) * 1000)
                    remaining -= 1

    try:
        receiver = asyncio.create_task(receive())
        cpu = meter.take()
        begin = time.perf_counter()
        await drive(result.messages, result.rate, send, in_flight=UNPACED_IN_FLIGHT)
        await asyncio.wait_for(receiver, timeout=120)
        result.elapsed_s = time.perf_counter() - begin
        result.measure(meter, cpu)
    finally:
        with suppress(Exception):
            await js.delete_stream(stream)
        await nc.close()
    return result


# -- the command ----------------------------------------------------------------------------


@contextmanager
def workdir() -> Iterator[Path]:
    root = Path(tempfile.mkdtemp(prefix="agentbus-bench-"))
    try:
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


def beside(gateway: dict[str, Any], ceiling: dict[str, Any]) -> dict[str, Any]:
    """One mode's gateway figures next to raw JetStream's, and the gateway's share of it."""
    keys = ("msgs_per_sec", "p50_ms", "p99_ms", "delivered_p50_ms", "cpu_ms_per_msg")
    ours, theirs = gateway["msgs_per_sec"], ceiling["msgs_per_sec"]
    return {
        "beside": gateway["mode"],
        "rate": gateway["rate"],
        "gateway": {k: gateway.get(k) for k in keys},
        "nats": {k: ceiling.get(k) for k in keys},
        "share_of_ceiling": round(ours / theirs, 3) if ours and theirs else None,
    }


def goals(paced: dict[str, Any], unpaced: dict[str, Any]) -> dict[str, Any]:
    p50, p99, rate = paced["p50_ms"], paced["p99_ms"], unpaced["msgs_per_sec"]
    return {
        "goals": {
            f"p50_ms<{GOAL_P50_MS:g}@{paced['rate']:g}/s": p50 is not None and p50 < GOAL_P50_MS,
            f"p99_ms<{GOAL_P99_MS:g}@{paced['rate']:g}/s": p99 is not None and p99 < GOAL_P99_MS,
            f"msgs_per_sec>={GOAL_MSGS_PER_SEC:g}": rate is not None and rate >= GOAL_MSGS_PER_SEC,
        }
    }


async def run_bench(dep: Deployment, work: Workload, emit: Emit) -> None:
    dep.tenant_id, token = await make_tenant(
        str(dep.database_url), dep.root / "config" / "keyring.json"
    )
    await asyncio.to_thread(dep.start_gateway)
    async with httpx.AsyncClient(base_url=dep.url, timeout=30) as client:
        agents = [
            (await enroll(client, token, f"sender-{i}"), await enroll(client, token, f"reader-{i}"))
            for i in range(work.lanes)
        ]
    meter = dep.meter()
    emit(benchhost.probe(HOST_PROBE_S).summary())  # services up and idle: the machine alone
    lanes = [Lane(dep.url, *pair) for pair in agents]
    payloads = "inline" if dep.inline_payloads else "store"
    bench = GatewayBench(lanes, meter, work.delivery, dep.workers, payloads)
    try:
        if work.warmup:
            await bench.run(Result("gateway", "warmup", work.warmup, None))
        if work.lone_rounds:
            first = bench.lanes[0]
            emit(
                await lone_rounds(
                    first.send_client, first.recv_client, first.envelope, work.lone_rounds, meter
                )
            )
        paced = (await bench.run(Result("gateway", "paced", work.messages, work.rate))).summary()
        emit(paced)
        unpaced = (await bench.run(Result("gateway", "unpaced", work.messages, None))).summary()
        emit(unpaced)
        payload = bench.lanes[0].envelope(0)
    finally:
        await bench.aclose()
    if work.raw:
        nats_url, nats_only = str(dep.nats_url), CpuMeter({"nats": meter.services.get("nats")})
        for gateway_run, pace in ((paced, work.rate), (unpaced, None)):
            mode = gateway_run["mode"]
            raw_run = Result("nats", mode, work.messages, pace)
            ceiling = (await raw_nats(nats_url, raw_run, payload, nats_only)).summary()
            emit(ceiling)
            emit(beside(gateway_run, ceiling))
    emit(goals(paced, unpaced))


def bench(
    messages: int,
    rate: float,
    *,
    database_url: str | None = None,
    nats_url: str | None = None,
    workers: int = 1,
    lanes: int = 1,
    warmup: int = 200,
    raw: bool = True,
    lone: int = 0,
    delivery: str = LONG_POLL,
    inline_payloads: bool = False,
    emit: Emit | None = None,
) -> None:
    """Run the whole benchmark; ``emit`` gets one dict per line (default: print JSON)."""
    if delivery not in DELIVERIES:
        raise ValueError(f"delivery is one of {', '.join(sorted(DELIVERIES))}, not {delivery!r}")
    out = emit or (lambda row: print(json.dumps(row), flush=True))
    with workdir() as root:
        dep = Deployment(root, database_url, nats_url, workers, inline_payloads)
        try:
            dep.start_services()
            work = Workload(messages, rate, warmup, lanes, raw, lone, delivery)
            asyncio.run(run_bench(dep, work, out))
        except Exception:
            for line in gateway_errors(dep.root / "gateway.log"):
                print(f"gateway: {line}", file=sys.stderr)
            raise
        finally:
            dep.stop()


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
