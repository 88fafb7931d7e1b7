"""The benchmark's runs through the gateway (``agentbus-gateway bench``): each lane's sender
flushes its queued envelopes as a sidecar flushes its outbox (``POST /v1/messages/batch``, or
``send`` frames on its delivery WebSocket), its receiver long-polls and reads, or holds the
delivery WebSocket; ``Result`` is one run's figures, shared with the raw JetStream run
(``bench.raw``), and ``drive`` paces either.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import time
from collections import Counter
from collections.abc import Callable, Coroutine
from contextlib import suppress
from dataclasses import dataclass, field
from typing import Any

import httpx
from agentbus_sidecar.envelope import build_envelope, sign_envelope
from agentbus_sidecar.errors import GatewayError, GatewayUnreachable
from agentbus_sidecar.push import CREDIT, DeliverySocket, open_socket
from agentbus_sidecar.sync import LONG_POLL, PUSH
from websockets.asyncio.client import ClientConnection
from wirekit import canonical_json

from agentbus.bench.cpu import CpuMeter
from agentbus.bench.deploy import Agent
from agentbus.bench.http import Client, HttpError
from agentbus.bench.lone import batch_body, percentile, read_all

BATCH_MAX = 100
HTTP = "http"
SENDS = (HTTP, PUSH)


def sends_for(delivery: str, sends: str | None) -> str:
    """How the senders send: ``sends``, by default as the sidecar does with ``delivery`` (send
    frames on its delivery WebSocket, HTTP without one); ValueError for send frames without the
    socket."""
    chosen = sends or (PUSH if delivery == PUSH else HTTP)
    if chosen not in SENDS or (chosen == PUSH and delivery != PUSH):
        raise ValueError(f"sends is {HTTP}, or {PUSH} with delivery {PUSH}; not {chosen!r}")
    return chosen


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
    error_kinds: Counter[str] = field(default_factory=Counter)
    """What the errors were: a refused send's problem code (``send:AB-…``; ``send:no answer``
    when its request or frame failed whole), a read's result (``read:…``)."""
    cpu_ms_per_msg: dict[str, float] | None = None
    delivery: str | None = None  # of a gateway run, with its gateway's workers and its lanes
    sends: str | None = None  # how its senders sent: http, or websocket (send frames)
    workers: int | None = None
    lanes: int | None = None
    payloads: str | None = None  # the gateway's setting: inline or store
    policies: str | None = None  # the tenant's policy set (bench.policies)
    payload_opens: dict[str, int] | None = None  # what the gateway's metric counted, by source

    def failed(self, kind: str) -> None:
        self.errors += 1
        self.error_kinds[kind] += 1

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
                    "sends": self.sends,
                    "workers": self.workers,
                    "lanes": self.lanes,
                    "payloads": self.payloads,
                    "policies": self.policies,
                    "payload_opens": self.payload_opens,
                }
            ),
            "rate": self.rate,
            "messages": self.messages,
            "acked": len(lat),
            "errors": self.errors,
            **({"error_kinds": dict(self.error_kinds)} if self.error_kinds else {}),
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
    lone_rounds: int = 0  # messages one at a time first, for each request's CPU (bench.lone)
    delivery: str = LONG_POLL  # how the receiving clients get their messages
    policies: str = "default"  # the tenant's policy set (bench.policies)
    sends: str = HTTP  # how the sending clients send: HTTP, or PUSH (send frames)


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


def _bearer(agent: Agent) -> dict[str, str]:
    return {"Authorization": f"Bearer {agent.credential}"}


def _ok(status: int, body: dict[str, Any]) -> dict[str, Any]:
    if status != 200:
        raise HttpError(f"{status}: {body}")
    return body


class Lane:
    """One sending agent and one receiving agent, each with its own connection."""

    def __init__(self, url: str, sender: Agent, receiver: Agent) -> None:
        self.url = url
        self.send_client = Client(url, 1, _bearer(sender))
        self.recv_client = Client(url, 1, _bearer(receiver))
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


class SenderSocket:
    """A sending agent's delivery WebSocket, held as its sidecar holds one: the status frames
    of what it sent are read and dropped, and batches may go on it as ``send`` frames."""

    def __init__(self, ws: ClientConnection, lane: Lane) -> None:
        self.ws = ws
        self.socket = DeliverySocket(ws, lane.sender.credential, lane.url)
        frames: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue()
        self.tasks = [
            asyncio.create_task(self.socket.read(frames)),
            asyncio.create_task(_drop(frames)),
        ]

    async def aclose(self) -> None:
        for task in self.tasks:
            task.cancel()
        with suppress(Exception):
            await self.ws.close()


async def _drop(frames: asyncio.Queue[dict[str, Any] | None]) -> None:
    while await frames.get() is not None:
        pass


class Run:
    """One run over the lanes: message ``n`` travels in lane ``n % len(lanes)``; with
    ``senders``, each lane's batches go as ``send`` frames on its sender's socket."""

    def __init__(
        self, lanes: list[Lane], result: Result, senders: list[SenderSocket] | None = None
    ) -> None:
        self.lanes, self.result, self.senders = lanes, result, senders
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
        queued, wake = self.queued[lane], self.wake[lane]
        while self.remaining > 0:
            await wake.wait()
            wake.clear()
            while queued:
                batch, queued[:] = queued[:BATCH_MAX], queued[BATCH_MAX:]
                results = await self._post(lane, [self.bodies[n] for n in batch])
                now = time.perf_counter()
                for n, item in zip(batch, results, strict=True):
                    self.accepted_at[self.ids[n]] = now
                    if item.get("status") not in (200, 202):
                        self.result.failed(f"send:{_code(item)}")
                        self.sent_at.pop(self.ids[n], None)
                        self._settled()

    async def _post(self, lane: int, bodies: list[bytes]) -> list[dict[str, Any]]:
        """One batch of the lane: its per-envelope results, empty ones if it failed whole."""
        failed: list[dict[str, Any]] = [{}] * len(bodies)
        if self.senders:
            try:
                return await self.senders[lane].socket.send_batch(bodies)
            except (GatewayError, GatewayUnreachable):
                return failed
        client = self.lanes[lane].send_client
        status, content = await client.request(
            "POST", "/v1/messages/batch", batch_body(bodies), "application/json"
        )
        answer = json.loads(content) if status == 200 else {}
        results: list[dict[str, Any]] = answer.get("results") or failed
        return results

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
                    raise HttpError(f"the delivery WebSocket closed ({ws.close_code})")
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
                self.result.failed(f"read:{item.get('result')}")
            self._settled()


def _code(item: dict[str, Any]) -> str:
    """A refused send's problem code; "no answer" for a request or frame that failed whole."""
    problem = item.get("problem")
    return str(problem.get("code")) if isinstance(problem, dict) else "no answer"


class GatewayBench:
    def __init__(
        self,
        lanes: list[Lane],
        meter: CpuMeter,
        delivery: str = LONG_POLL,
        workers: int = 1,
        payloads: str = "store",
        policies: str = "default",
        sends: str = HTTP,
    ) -> None:
        self.lanes, self.meter, self.delivery, self.workers = lanes, meter, delivery, workers
        self.payloads, self.policies, self.sends = payloads, policies, sends

    async def aclose(self) -> None:
        for lane in self.lanes:
            await lane.aclose()

    async def run(self, result: Result) -> Result:
        """One run; with WebSocket delivery each lane's receiver and sender connect (the
        receiver granting credit) before the clock starts, as their sidecars would hold their
        sockets, and close after the run (a long-poll of the same agent, as the lone rounds
        make, would replace a socket left open)."""
        result.delivery, result.workers, result.lanes = self.delivery, self.workers, len(self.lanes)
        result.payloads, result.policies, result.sends = self.payloads, self.policies, self.sends
        sockets: list[ClientConnection] = []
        senders: list[SenderSocket] = []
        try:
            if self.delivery == PUSH:
                for lane in self.lanes:
                    sockets.append(await open_socket(lane.url, lane.receiver.credential))
                    await sockets[-1].send(json.dumps({"type": "credit", "n": CREDIT}))
                    sender = await open_socket(lane.url, lane.sender.credential)
                    senders.append(SenderSocket(sender, lane))
                    await sender.send(json.dumps({"type": "credit", "n": CREDIT}))
            run = Run(self.lanes, result, senders if self.sends == PUSH else None)
            return await self._run(run, sockets)
        finally:
            for ws in sockets:
                with suppress(Exception):
                    await ws.close()
            for socket in senders:
                await socket.aclose()

    async def _run(self, run: Run, sockets: list[ClientConnection]) -> Result:
        result = run.result
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
        if worker.done() and not worker.cancelled() and (exc := worker.exception()) is not None:
            raise RuntimeError(f"a benchmark client failed: {type(exc).__name__}: {exc}") from exc
    if not done.is_set():
        raise TimeoutError(f"the run did not finish in {limit_s:g} s")
