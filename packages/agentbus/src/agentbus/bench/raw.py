"""The benchmark's ceiling (``agentbus-gateway bench``): the same workload over raw NATS
JetStream, envelopes of the same size published with ``Nats-Msg-Id`` to a file-backed stream,
pulled by a durable pull consumer and acked each with a confirmed ack.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from contextlib import suppress

import nats
from nats.js.api import AckPolicy, ConsumerConfig, StorageType, StreamConfig

from agentbus.bench.cpu import CpuMeter
from agentbus.bench.runs import Result, drive

UNPACED_IN_FLIGHT = 32


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
