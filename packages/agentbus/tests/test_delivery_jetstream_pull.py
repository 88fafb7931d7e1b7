"""The pull's requests to JetStream, on a real NATS server: a long-poll whose lingering request
brings a message with nothing pending after it answers without asking again."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import nats
import pytest
from agentbus.delivery import jetstream
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.js.api import AckPolicy, ConsumerConfig, StreamConfig

CONSUMER = "reader"


@dataclass
class Stream:
    """A stream with one durable pull consumer; the pull requests made to the consumer, and
    whether one of them lingers (no ``no_wait``)."""

    nc: Client
    name: str
    subject: str
    requests: list[dict[str, Any]] = field(default_factory=list)
    lingering: asyncio.Event = field(default_factory=asyncio.Event)


@pytest.fixture
async def stream(nats_url: str) -> AsyncIterator[Stream]:
    nc = await nats.connect(nats_url)
    js = nc.jetstream()
    tag = uuid.uuid4().hex[:12]
    name, subject = f"PULL_{tag}", f"pull.{tag}"
    await js.add_stream(StreamConfig(name=name, subjects=[subject]))
    await js.add_consumer(
        name, ConsumerConfig(durable_name=CONSUMER, ack_policy=AckPolicy.EXPLICIT)
    )
    opened = Stream(nc, name, subject)

    async def seen(msg: Msg) -> None:
        request = json.loads(msg.data)
        opened.requests.append(request)
        if not request.get("no_wait"):
            opened.lingering.set()

    await nc.subscribe(f"$JS.API.CONSUMER.MSG.NEXT.{name}.{CONSUMER}", cb=seen)
    try:
        yield opened
    finally:
        await js.delete_stream(name)
        await nc.close()


async def test_a_lone_message_after_the_wait_costs_no_further_request(stream: Stream) -> None:
    nc, name, subject, requests = stream.nc, stream.name, stream.subject, stream.requests

    async def publish_soon() -> None:  # once the pull is waiting
        await stream.lingering.wait()
        await nc.jetstream().publish(subject, b"one")

    sender = asyncio.create_task(publish_soon())
    got = await jetstream.pull(nc, name, CONSUMER, batch=10, max_bytes=1 << 20, wait_s=5)
    await sender
    await nc.flush()
    assert [m.data for m in got] == [b"one"]
    assert [bool(r.get("no_wait")) for r in requests] == [True, False]


async def test_what_is_pending_now_comes_in_one_request(stream: Stream) -> None:
    nc, name, subject, requests = stream.nc, stream.name, stream.subject, stream.requests
    for n in range(3):
        await nc.jetstream().publish(subject, f"m{n}".encode())
    got = await jetstream.pull(nc, name, CONSUMER, batch=10, max_bytes=1 << 20, wait_s=5)
    await nc.flush()
    assert [m.data for m in got] == [b"m0", b"m1", b"m2"]
    assert [bool(r.get("no_wait")) for r in requests] == [True]


def _delivered(pending: int) -> Msg:
    reply = f"$JS.ACK.S.C.1.7.7.1700000000000000000.{pending}"
    return Msg(_client=None, subject="x", reply=reply)  # type: ignore[arg-type]


@pytest.mark.parametrize(("reply_pending", "expected"), [(0, True), (2, False)])
def test_the_ack_subject_tells_whether_more_was_pending(reply_pending: int, expected: bool) -> None:
    assert jetstream._nothing_pending_after(_delivered(reply_pending)) is expected


def test_a_message_without_an_ack_subject_is_drained_after() -> None:
    msg = Msg(_client=None, subject="x", reply="_INBOX.abc")  # type: ignore[arg-type]
    assert jetstream._nothing_pending_after(msg) is False
