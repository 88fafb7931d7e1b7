"""Handing out deliveries (05-DELIVERY-SEMANTICS.md §4 steps 2-4).

Pull from the agent's consumer; then one transaction for the whole pull: decide about every
copy (``copies``: triage on the rows it reads, policy re-check) and write the outcome
(``fetched``, attempts, ``last_fetched_at``, sequence, and the copies dropped as expired or
discarded). That transaction is shared with the pulls of other agents of the tenant whose
copies arrive at the same moment (``_in_round``, a group commit). Then the payloads, outside
any transaction, so a slow object store holds no database connection; a copy whose payload
fails is recorded by a transaction of its own (a dead letter, or a nak as the recipient's own
would be). Then the settles of dropped copies; then the answer, in stream order, each delivery
with its ack token.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import psycopg
from nats.aio.client import Client
from nats.aio.msg import Msg
from platformkit import fastjson
from platformkit.db.outage import database_unreachable
from platformkit.db.scope import Conn

from agentbus.broker import consumer_name, stream_name
from agentbus.db import pipelined_transaction
from agentbus.delivery import jetstream, notices, outcomes, store
from agentbus.delivery.consumers import ensure_consumer, forget_consumer
from agentbus.delivery.copies import (
    NAK_AFTER_DATABASE_FAILURE_MS,
    Copy,
    load_payloads,
    parse_copy,
    recheck_policy,
    triage_all,
)
from agentbus.delivery.domain import Triage
from agentbus.delivery.notices import Notes
from agentbus.delivery.service import DeliveryService, nats_client
from agentbus.delivery.tokens import InvalidAckToken
from agentbus.delivery.views import delivery_view
from agentbus.errors import DatabaseUnavailable
from agentbus.gateway.api.principals import AgentPrincipal
from agentbus.gateway.domain.errors import BrokerUnavailable
from agentbus.gateway.metrics import DELIVERIES
from agentbus.gateway.store.agents import agents_cursor

log = logging.getLogger(__name__)

Row = dict[str, Any]


async def fetch(
    svc: DeliveryService,
    who: AgentPrincipal,
    *,
    wait_s: float,
    max_items: int,
    max_bytes: int,
    stop: asyncio.Event | None = None,
) -> list[dict[str, Any]]:
    """Deliveries for ``who``: the long-poll's and the WebSocket's one way to pull. While
    PostgreSQL or the object store is down, none (``DeliveryService.pulls_may_go_on``); a pull
    that finds PostgreSQL gone hands back what it took and raises AB-9002. A pull whose round
    PostgreSQL failed to end a deadlock (or a serialization failure) wrote nothing: it hands its
    copies back at once, for the next pull to take, and answers none."""
    nc = nats_client(svc.gateway.broker)
    if not await svc.pulls_may_go_on(wait_s, stop):
        return []
    copies: list[Copy] = []
    try:
        copies = await _pull(svc, who, nc, wait_s, max_items, max_bytes, stop)
        if not copies:
            return []
        handing = Pull(who, copies)
        keys = await _in_round(svc, handing)
        notes = handing.notes
        failed = await load_payloads(svc, who, copies)
        if failed:
            async with pipelined_transaction(svc.gateway.pool, who.tenant_id) as conn:
                await _record_drops(conn, who, failed, notes)
        await notices.publish(svc.gateway.broker, notes)
    except (psycopg.errors.DeadlockDetected, psycopg.errors.SerializationFailure):
        log.warning("a pull round was rolled back by PostgreSQL; its copies go back at once")
        await _hand_back(nc, copies, 0)
        return []
    except Exception as exc:
        if not database_unreachable(exc):
            raise
        svc.database.failed(time.monotonic())
        # each comes back once the nak's delay is over, as after AckWait
        await _hand_back(nc, copies, NAK_AFTER_DATABASE_FAILURE_MS)
        raise DatabaseUnavailable("PostgreSQL did not answer; retry with backoff") from exc
    answer = _answer(svc, who, copies, keys, max_bytes)
    for copy in copies:
        if copy.settle is not None and copy.msg.reply:
            await jetstream.settle_quietly(nc, copy.msg.reply, copy.settle, copy.nak_ms)
    return answer


async def _hand_back(nc: Client, copies: list[Copy], delay_ms: int) -> None:
    for copy in copies:
        if copy.msg.reply:
            await jetstream.settle_quietly(nc, copy.msg.reply, "nak", delay_ms)


async def _pull(
    svc: DeliveryService,
    who: AgentPrincipal,
    nc: Client,
    wait_s: float,
    max_items: int,
    max_bytes: int,
    stop: asyncio.Event | None,
) -> list[Copy]:
    """The copies JetStream hands out to the agent's consumer (verified first)."""
    pulled: list[Msg] = []
    for retry in (False, True):
        await ensure_consumer(svc, who)
        try:
            pulled = await jetstream.pull(
                nc, stream_name(who.tenant_id), consumer_name(who.agent_id),
                batch=max_items, max_bytes=max_bytes, wait_s=wait_s, stop=stop,
            )  # fmt: skip
            break
        except jetstream.ConsumerMissing as exc:
            forget_consumer(svc, who)
            if retry:
                raise BrokerUnavailable("the agent's consumer is missing") from exc
    copies = []
    for msg in pulled:
        try:
            copies.append(parse_copy(msg))
        except InvalidAckToken:
            log.warning("pulled a message without a JetStream ack subject: %r", msg.reply)
    svc.pending[(who.tenant_id, who.agent_id)] = min((c.pending for c in copies), default=0)
    return copies


@dataclass(eq=False)
class Pull:
    """The copies pulled for one agent, decided about and written in a round with the pulls of
    other agents of the tenant that come at the same moment (``_in_round``); ``notes`` gets
    the status notices to publish after the commit."""

    who: AgentPrincipal
    copies: list[Copy]
    notes: Notes = field(default_factory=list)


async def _in_round(svc: DeliveryService, pull: Pull) -> dict[uuid.UUID, Row]:
    """Group commit of pulls: those of every agent of the tenant whose copies arrive while the
    tenant's previous round is being written go into the next round, one transaction, one read
    of the rows and one write of the fetches for all of them (``agentbus.gathered``). Returns
    the sender keys of the deliveries."""
    rounds = svc.rounds.of("pull", functools.partial(_round, svc))
    keys = await rounds.ask(pull.who.tenant_id, pull)
    assert keys is not None, "a round answers every pull"
    return keys  # type: ignore[no-any-return]


async def _round(
    svc: DeliveryService, tenant_id: uuid.UUID, pulls: list[Pull]
) -> dict[Pull, dict[uuid.UUID, Row]]:
    """One transaction for the pulls of a round. A message pulled twice in one round (an agent
    with two pulls at once, as when a new connection replaces an old one) makes the round
    write its pulls one after the other, so the later one sees the earlier one's change."""
    ids = [c.msg_id for p in pulls for c in p.copies if c.msg_id is not None]
    if len(pulls) > 1 and len(set(ids)) != len(ids):
        return {p: (await _round(svc, tenant_id, [p]))[p] for p in pulls}
    async with pipelined_transaction(svc.gateway.pool, tenant_id) as conn:
        await triage_all(conn, tenant_id, [(p.who.agent_id, p.copies) for p in pulls])
        cursor = await agents_cursor(conn, tenant_id, [p.who.agent_id for p in pulls])
        recipients = {row["id"]: row for row in await cursor.fetchall()}
        for p in pulls:
            await recheck_policy(svc, conn, p.who, p.copies, recipients.get(p.who.agent_id))
        keys = await _write(svc, conn, tenant_id, pulls)
    return dict.fromkeys(pulls, keys)


async def _write(
    svc: DeliveryService, conn: Conn, tenant_id: uuid.UUID, pulls: list[Pull]
) -> dict[uuid.UUID, Row]:
    """The round's writes; returns the sender keys of the deliveries. A delivery whose message
    turned terminal meanwhile (sweeper, term) is dropped after all."""
    handed = [c for p in pulls for c in p.copies if c.verdict is Triage.DELIVER and c.row]
    for p in pulls:
        await _record_drops(conn, p.who, p.copies, p.notes)
    moved = await store.mark_fetched(
        conn, tenant_id,
        [row | {"attempt": c.attempt, "stream_seq": c.stream_seq}
         for c in handed if (row := c.row) is not None],
    )  # fmt: skip
    keys = await _sender_keys(svc, conn, tenant_id, handed)
    for copy in handed:
        if copy.msg_id not in moved:
            copy.drop("ack")
    return keys


async def _record_drops(conn: Conn, who: AgentPrincipal, copies: list[Copy], notes: Notes) -> None:
    """What became of the copies the gateway dropped itself: expired, discarded, dead-lettered,
    or naked for later (a redrive's copy ahead of its commit is not a nak of the message)."""
    for copy in copies:
        row = copy.row
        if row is None:
            continue
        if copy.verdict is Triage.EXPIRED:
            await outcomes.expire(conn, who.tenant_id, row, notes)
        elif copy.discard:
            await outcomes.discard(conn, who.tenant_id, row, notes, copy.denied_by)
        elif copy.dlq_reason is not None:
            await outcomes.dead_letter(conn, who.tenant_id, row, copy.dlq_reason, notes)
        elif copy.settle == "nak" and copy.verdict is not Triage.AHEAD:
            await outcomes.nak(conn, who.tenant_id, who.agent_id, row, copy.nak_ms)


async def _sender_keys(
    svc: DeliveryService, conn: Conn, tenant_id: uuid.UUID, handed: list[Copy]
) -> dict[uuid.UUID, Row]:
    """The signing keys of the handed-out envelopes, so the sidecar can verify them (04 §5.1),
    from the gateway's directory (one-second copies, as the send path reads them); those not
    at hand are read by one statement."""
    wanted = [c.row["signing_key_id"] for c in handed if c.row is not None]
    return await svc.gateway.directory.keys(conn, tenant_id, wanted)


def _answer(
    svc: DeliveryService,
    who: AgentPrincipal,
    copies: list[Copy],
    keys: dict[uuid.UUID, Row],
    max_bytes: int,
) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    size = 0
    for copy in sorted(copies, key=lambda c: c.stream_seq):
        if copy.verdict is not Triage.DELIVER or copy.row is None or copy.msg_id is None:
            continue
        envelope = copy.envelope | {"data": copy.data}
        token = svc.tokens.mint(who.tenant_id, who.agent_id, copy.msg_id, copy.msg.reply or "")
        item = delivery_view(copy.row, copy.attempt, copy.stream_seq, token, envelope, keys)
        item_size = len(fastjson.dumps(item))
        if out and size + item_size > max_bytes:
            # Over the response budget: hand it back at once, first in line for the next pull.
            copy.drop("nak")
            continue
        out.append(item)
        size += item_size
        DELIVERIES.inc()
        if copy.msg.reply:
            svc.remember_handed(who.tenant_id, who.agent_id, copy.msg_id, copy.msg.reply)
    return out
