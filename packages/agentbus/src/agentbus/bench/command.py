"""``agentbus-gateway bench``: end-to-end latency and throughput of the gateway, and the same
workload over raw NATS JetStream as the ceiling.

The gateway runs as its own process (``agentbus-gateway serve``) on a throwaway PostgreSQL and
NATS unless URLs are given (on given servers it creates its own database and tenant, and removes
the database and the tenant's stream at the end; ``bench.deploy``). A lane is two agents
registered with sidecar keys (``--lanes``, default one; message ``n`` travels in lane
``n % lanes``). A lane's sending client signs envelopes with the sidecar's envelope module and
flushes them as a sidecar flushes its outbox: the messages of the lane queued so far, up to
100, in one ``POST /v1/messages/batch``, with one request in flight (the next batch of a lane
waits for the answer to the previous one). Its receiving client long-polls ``GET /v1/inbox`` and
application-acks each pulled batch with ``POST /v1/inbox/read`` (which records the transport
ack too); with ``--delivery websocket`` it holds the delivery WebSocket instead, as
``agentbus sidecar run`` does by default, and application-acks the deliveries that arrived
together with one ``read`` frame on the socket (so the worker that handed them out also acks
them in JetStream, as it does for the sidecar's frames), granting their credit again after the
``result`` (``bench.runs``). The sending client then holds its agent's delivery WebSocket too
(hearing the status of what it sent), and by default sends each batch as one ``send`` frame on
it, as the sidecar does; ``--sends http`` keeps ``POST /v1/messages/batch`` beside the same
sockets, so the two can be compared. A message's latency runs from the moment it is queued to
the answer of the read that acked it. Both clients are the lean keep-alive HTTP/1.1 client of
``bench.http`` (and the sidecar's WebSocket client), in this process. Envelopes are built and
signed before a run starts (a sidecar signs when it queues, not when it sends), so the client's
share of the CPU is its traffic.

The raw run publishes envelopes of the same size with ``Nats-Msg-Id`` to a file-backed stream,
pulls them with a durable pull consumer and acks each with a confirmed ack (``bench.raw``).

The first line says how steady the machine's CPU is (``bench.host``): on a shared virtual
machine the host may slow the guest for a tenth of a second at a time, which every run's p99
then includes. Each run prints one JSON object per line, with the CPU time its messages cost
per process (``cpu_ms_per_msg``: gateway, PostgreSQL, NATS, this client; ``bench.cpu``), which
stays meaningful when other work shares the machine and the wall-clock figures do not. With
``--lone-rounds N`` a line for messages sent one at a time comes before the runs, with each
request's CPU per service (``bench.lone``). Then one line per mode puts the gateway beside the
raw JetStream ceiling, and the last line compares the gateway runs with the goals (``goals``:
paced, p50 < 10 ms and p99 < 50 ms, or p50 < 5 ms at 50/s and below; unpaced, >= 2000 msg/s,
>= 40% of raw JetStream's rate, <= 0.8 ms of CPU per message). A run that fails ends with its
first failure and, on standard error, the gateway's last logged errors (``gateway_errors``),
since the gateway's log goes with the throwaway directory.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Callable
from typing import Any

import httpx
from agentbus_sidecar.sync import DELIVERIES, LONG_POLL

from agentbus.bench import host
from agentbus.bench.analytics import set_analytics_triggers
from agentbus.bench.cpu import CpuMeter
from agentbus.bench.deploy import Deployment, enroll, gateway_errors, make_tenant, workdir
from agentbus.bench.lone import lone_rounds
from agentbus.bench.policies import POLICY_SETS
from agentbus.bench.policies import install as install_policies
from agentbus.bench.raw import raw_nats
from agentbus.bench.runs import GatewayBench, Lane, Result, Workload, sends_for

GOAL_CPU_MS, GOAL_MSGS_PER_SEC, GOAL_SHARE_OF_CEILING = 0.8, 2000.0, 0.4
"""Unpaced: CPU per message end to end (every process), messages a second, share of raw
JetStream's unpaced rate in the same run."""
LOW_RATE = 50.0
"""Paced at or below it: p50 under 5 ms; above it: p50 under 10 ms and p99 under 50 ms."""
HOST_PROBE_S = 5.0
Emit = Callable[[dict[str, Any]], None]


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


def goals(
    paced: dict[str, Any], unpaced: dict[str, Any], ceiling: dict[str, Any] | None = None
) -> dict[str, Any]:
    """Which goals the runs met; ``ceiling``: raw JetStream's unpaced run, when there was one."""

    def below(value: float | None, bound: float) -> bool:
        return value is not None and value < bound

    def at_least(value: float | None, bound: float) -> bool:
        return value is not None and value >= bound

    rate = paced["rate"]
    checks: dict[str, bool] = {}
    if rate <= LOW_RATE:
        checks[f"p50_ms<5@{rate:g}/s"] = below(paced["p50_ms"], 5.0)
    else:
        checks[f"p50_ms<10@{rate:g}/s"] = below(paced["p50_ms"], 10.0)
        checks[f"p99_ms<50@{rate:g}/s"] = below(paced["p99_ms"], 50.0)
    throughput = unpaced["msgs_per_sec"]
    checks[f"msgs_per_sec>={GOAL_MSGS_PER_SEC:g}"] = at_least(throughput, GOAL_MSGS_PER_SEC)
    if ceiling is not None:
        raw = ceiling["msgs_per_sec"]
        share = throughput / raw if throughput and raw else None
        checks[f"share_of_ceiling>={GOAL_SHARE_OF_CEILING:g}"] = at_least(
            share, GOAL_SHARE_OF_CEILING
        )
    cpu = (unpaced.get("cpu_ms_per_msg") or {}).get("total")
    checks[f"cpu_ms_per_msg<={GOAL_CPU_MS:g}"] = cpu is not None and cpu <= GOAL_CPU_MS
    return {"goals": checks}


async def run_bench(dep: Deployment, work: Workload, emit_row: Emit) -> None:
    def emit(row: dict[str, Any]) -> None:
        emit_row({**row, "analytics": dep.analytics})

    dep.tenant_id, token = await make_tenant(
        str(dep.database_url), dep.root / "config" / "keyring.json"
    )
    if not dep.analytics:  # the baseline: no outbox rows either
        await set_analytics_triggers(str(dep.database_url), enabled=False)
    await install_policies(str(dep.database_url), dep.tenant_id, work.policies)
    await asyncio.to_thread(dep.start_gateway)
    async with httpx.AsyncClient(base_url=dep.url, timeout=30) as client:
        agents = [
            (await enroll(client, token, f"sender-{i}"), await enroll(client, token, f"reader-{i}"))
            for i in range(work.lanes)
        ]
    meter = dep.meter()
    emit(host.probe(HOST_PROBE_S).summary())  # services up and idle: the machine alone
    lanes = [Lane(dep.url, *pair) for pair in agents]
    payloads = "inline" if dep.inline_payloads else "store"
    bench = GatewayBench(
        lanes, meter, work.delivery, dep.workers, payloads, work.policies, work.sends
    )
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
    ceiling = None
    if work.raw:
        nats_url, nats_only = str(dep.nats_url), CpuMeter({"nats": meter.services.get("nats")})
        for gateway_run, pace in ((paced, work.rate), (unpaced, None)):
            mode = gateway_run["mode"]
            raw_run = Result("nats", mode, work.messages, pace)
            ceiling = (await raw_nats(nats_url, raw_run, payload, nats_only)).summary()
            emit(ceiling)
            emit(beside(gateway_run, ceiling))
    emit(goals(paced, unpaced, ceiling))  # the ceiling last measured: the unpaced one


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
    analytics: bool = True,
    policies: str = "default",
    sends: str | None = None,
    emit: Emit | None = None,
) -> None:
    """Run the whole benchmark; ``emit`` gets one dict per line (default: print JSON).
    ``sends``: ``runs.sends_for``."""
    if delivery not in DELIVERIES:
        raise ValueError(f"delivery is one of {', '.join(sorted(DELIVERIES))}, not {delivery!r}")
    if policies not in POLICY_SETS:
        raise ValueError(f"policies is one of {', '.join(POLICY_SETS)}")
    sends = sends_for(delivery, sends)
    out = emit or (lambda row: print(json.dumps(row), flush=True))
    with workdir() as root:
        dep = Deployment(root, database_url, nats_url, workers, inline_payloads, analytics)
        try:
            dep.start_services()
            work = Workload(messages, rate, warmup, lanes, raw, lone, delivery, policies, sends)
            asyncio.run(run_bench(dep, work, out))
        except Exception:
            for line in gateway_errors(dep.root / "gateway.log"):
                print(f"gateway: {line}", file=sys.stderr)
            raise
        finally:
            dep.stop()
