"""Settling deliveries: transport ack, nak, term (refuse) and read (05 §4 step 6, §5, §6.1).

Each batch runs in one transaction that writes PostgreSQL first; JetStream is settled only after
the commit, so a lost JetStream ack is caught by the next pull's triage (05 §10.3). Per item the
result is ``ok``, ``already_acked``, ``terminal`` (with the status, never to be presented) or
``invalid`` (bad id, a token that fails its HMAC or is another agent's, a message not to the
caller). Acks, naks and reads are idempotent per message. The acks and reads of a batch that
move a message are written together by one statement (``store.ack_many``), and so are those of
the batches of other agents of the tenant that come at the same moment: acks and reads are
group-committed per tenant and process (``_in_round``), since a thousand agents each reading a
message at a time would otherwise pay a transaction each.
"""

from __future__ import annotations

import contextlib
import functools
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from platformkit.db.scope import Conn

from agentbus.db import pipelined_transaction
from agentbus.delivery import handoff, jetstream, notices, outcomes, store
from agentbus.delivery.domain import REJECTED_BY_RECIPIENT, TERMINAL, Status, default_nak_delay_ms
from agentbus.delivery.notices import Notes
from agentbus.delivery.service import DeliveryService, nats_client
from agentbus.delivery.tokens import AckSubject, InvalidAckToken, parse_ack_subject
from agentbus.delivery.views import result
from agentbus.gateway.api.principals import AgentPrincipal
from agentbus.ids import InvalidId, parse_id

Row = dict[str, Any]
Results = list[dict[str, Any]]
Outcome = tuple[dict[str, Any], str | None]
One = Callable[[Conn, uuid.UUID, "Item", Row, Notes], Awaitable[Outcome | None]]
Many = Callable[[Conn, uuid.UUID, list[tuple["Item", Row]], Notes], Awaitable[list[Outcome]]]
Settled = tuple[Results, list[tuple[str, "Item"]]]
"""A request's results in its order, and the JetStream verbs to publish after the commit."""
_HANDED_OUT = frozenset({Status.ACCEPTED, Status.FETCHED})


@dataclass
class Item:
    """One ack, nak, term or read of a batch, after its id (and token) was checked."""

    text_id: str
    msg_id: uuid.UUID | None
    subject: AckSubject | None = None
    delay_ms: int | None = None
    reason: str | None = None
    read_at: datetime | None = None
    outcome: str = "read"


def check(svc: DeliveryService, who: AgentPrincipal, item: Item, token: Any) -> Item:
    """Parse the id and, when a token is given, verify it for this agent and message."""
    try:
        item.msg_id = parse_id("msg", item.text_id)
        if token is not None:
            item.subject = svc.tokens.verify(token, who.tenant_id, who.agent_id, item.msg_id)
    except (InvalidId, InvalidAckToken):
        item.msg_id = None
    return item


@dataclass(eq=False)
class Request:
    """One caller's batch; acks and reads are settled in a round with the batches of other
    agents of the tenant that come at the same moment (``_in_round``)."""

    who: AgentPrincipal
    items: list[Item]


async def _run(
    svc: DeliveryService,
    tenant_id: uuid.UUID,
    requests: list[Request],
    one: One,
    many: Many | None = None,
) -> list[Settled]:
    """``one(conn, tenant, item, row, notes)`` -> (result, JetStream verb or None) per valid
    item, or None to leave the item to ``many``, which settles all those items together (one
    statement) after the others. All requests share one transaction. Rows are locked in id
    order (two batches never deadlock), each filtered by its caller (another agent's message
    is ``invalid``). With a repeated id each item is settled at once instead, so the next copy
    sees the change, and the requests of a round run one after the other. Results keep each
    request's order; status notifications are published after the commit. The JetStream verbs
    come back with their items, for ``_settle`` after the commit."""
    items = [item for request in requests for item in request.items]
    owner = [n for n, request in enumerate(requests) for _ in request.items]
    ids = [i.msg_id for i in items if i.msg_id is not None]
    distinct = len(set(ids)) == len(ids)  # a repeated id re-reads its row after each change
    if not distinct and len(requests) > 1:
        return [(await _run(svc, tenant_id, [r], one, many))[0] for r in requests]
    results: list[dict[str, Any] | None] = [None] * len(items)
    settles: list[list[tuple[str, Item]]] = [[] for _ in requests]
    notes: Notes = []
    order = sorted(range(len(items)), key=lambda i: (items[i].msg_id or uuid.UUID(int=0)).bytes)
    deferred: list[tuple[int, Row]] = []

    def answer(index: int, outcome: Outcome) -> None:
        results[index], verb = outcome
        if verb is not None:
            settles[owner[index]].append((verb, items[index]))

    async with pipelined_transaction(svc.gateway.pool, tenant_id) as conn:
        to = {
            item.msg_id: requests[owner[i]].who.agent_id
            for i, item in enumerate(items)
            if item.msg_id is not None
        }
        locked = await store.lock_many(conn, tenant_id, to) if distinct else {}
        for index in order:
            item, row = items[index], None
            if item.msg_id is not None and distinct:
                row = locked.get(item.msg_id)
            elif item.msg_id is not None:
                row = await store.lock(conn, tenant_id, to[item.msg_id], item.msg_id)
            if row is None:
                results[index] = result(item.text_id, "invalid")
                continue
            outcome = await one(conn, tenant_id, item, row, notes)
            if outcome is not None:
                answer(index, outcome)
                continue
            assert many is not None, "an item left to the batch needs a batch settle"
            if distinct:
                deferred.append((index, row))
            else:
                answer(index, (await many(conn, tenant_id, [(item, row)], notes))[0])
        if deferred and many is not None:
            batch = [(items[index], row) for index, row in deferred]
            settled = await many(conn, tenant_id, batch, notes)
            for (index, _row), outcome in zip(deferred, settled, strict=True):
                answer(index, outcome)
    await notices.publish(svc.gateway.broker, notes)
    answered = [r for r in results if r is not None]
    assert len(answered) == len(items), "every item is answered"
    per_request: list[Settled] = []
    start = 0
    for n, request in enumerate(requests):
        per_request.append((answered[start : start + len(request.items)], settles[n]))
        start += len(request.items)
    return per_request


async def _round(
    svc: DeliveryService, verb: str, tenant_id: uuid.UUID, requests: list[Request]
) -> dict[Request, Settled]:
    one, many = _BATCHED[verb]
    return dict(zip(requests, await _run(svc, tenant_id, requests, one, many), strict=True))


async def _in_round(svc: DeliveryService, verb: str, request: Request) -> Settled:
    """Group commit: the acks (or reads) of every agent of the tenant that come while the
    tenant's previous round of them is being written go into the next round, one transaction
    and one statement per table for all of them (``agentbus.gathered``)."""
    rounds = svc.rounds.of(verb, functools.partial(_round, svc, verb))
    settled = await rounds.ask(request.who.tenant_id, request)
    assert settled is not None, "a round answers every request"
    return settled  # type: ignore[no-any-return]


async def _settle(
    svc: DeliveryService, who: AgentPrincipal, settles: list[tuple[str, Item]]
) -> None:
    """Settle the JetStream copies after the commit, each one a publish on the gateway's
    connection without waiting for JetStream's reply: a lost one costs a redelivery after
    AckWait, which triage drops. A copy whose ack subject is not known here (a read of a copy
    another process handed out) is acked by that process (``handoff``)."""
    if not settles:
        return
    try:
        nc = nats_client(svc.gateway.broker)
    except Exception:
        return  # PostgreSQL holds every fact; AckWait and triage do the rest
    elsewhere: list[uuid.UUID] = []
    for verb, item in settles:
        if item.subject is not None:
            await jetstream.settle_quietly(nc, item.subject.reply, verb, item.delay_ms or 0)
        elif verb == "ack" and item.msg_id is not None:
            elsewhere.append(item.msg_id)
    await handoff.ask_others(nc, who.tenant_id, who.agent_id, elsewhere)


def _settled(row: Row) -> bool:
    return Status(row["status"]) not in _HANDED_OUT or row["transport_acked_at"] is not None


def _terminal(item: Item, row: Row) -> dict[str, Any] | None:
    status = Status(row["status"])
    if status in TERMINAL and status is not Status.READ:
        return result(item.text_id, "terminal", status.value)
    return None


async def _ack_one(
    conn: Conn, tenant_id: uuid.UUID, item: Item, row: Row, notes: Notes
) -> Outcome | None:
    if item.subject is None:
        return result(item.text_id, "invalid"), None
    if (done := _terminal(item, row)) is not None:
        return done, "ack"  # no longer deliverable: drop the copy
    if _settled(row):
        return result(item.text_id, "already_acked", row["status"]), "ack"
    return None  # transport-acked with the rest of the batch


async def _ack_many(
    conn: Conn, tenant_id: uuid.UUID, batch: list[tuple[Item, Row]], notes: Notes
) -> list[Outcome]:
    rows = [row for _item, row in batch]
    moved = await outcomes.acknowledge(
        conn, tenant_id, rows, Status.DELIVERED, [None] * len(rows), notes
    )
    return [
        (result(item.text_id, "ok", Status.DELIVERED.value), "ack")
        if row["id"] in moved
        else (result(item.text_id, "terminal", row["status"]), "ack")
        for item, row in batch
    ]


async def _nak_one(conn: Conn, tenant_id: uuid.UUID, item: Item, row: Row, notes: Notes) -> Outcome:
    if item.subject is None:
        return result(item.text_id, "invalid"), None
    if (done := _terminal(item, row)) is not None:
        return done, "ack"
    if _settled(row):
        return result(item.text_id, "already_acked", row["status"]), None
    if item.delay_ms is None:
        item.delay_ms = default_nak_delay_ms(item.subject.delivered)
    await outcomes.nak(conn, tenant_id, row["to_agent_id"], row, item.delay_ms)
    return result(item.text_id, "ok", row["status"]), "nak"


async def _term_one(
    conn: Conn, tenant_id: uuid.UUID, item: Item, row: Row, notes: Notes
) -> Outcome:
    if item.subject is None:
        return result(item.text_id, "invalid"), None
    if (done := _terminal(item, row)) is not None:
        return done, "term"
    if _settled(row):
        return result(item.text_id, "already_acked", row["status"]), None
    reason = f"{REJECTED_BY_RECIPIENT}{item.reason}"
    if await outcomes.dead_letter(conn, tenant_id, row, reason, notes):
        return result(item.text_id, "ok", Status.DEAD_LETTERED.value), "term"
    return result(item.text_id, "terminal", row["status"]), "term"


async def _read_one(
    conn: Conn, tenant_id: uuid.UUID, item: Item, row: Row, notes: Notes
) -> Outcome | None:
    status = Status(row["status"])
    wanted = Status.EXPIRED if item.outcome == "expired" else Status.READ
    if status is wanted or (status is Status.READ and wanted is Status.EXPIRED):
        return result(item.text_id, "already_acked", status.value), None
    if status in TERMINAL:
        return result(item.text_id, "terminal", status.value), None
    if status is Status.ACCEPTED:  # never handed out: nothing the agent could have read
        return result(item.text_id, "invalid"), None
    if wanted is Status.READ:
        return None  # read with the rest of the batch
    if await outcomes.expire(conn, tenant_id, row, notes):
        return result(item.text_id, "ok", wanted.value), None
    return result(item.text_id, "terminal", status.value), None


async def _read_many(
    conn: Conn, tenant_id: uuid.UUID, batch: list[tuple[Item, Row]], notes: Notes
) -> list[Outcome]:
    rows, read_ats = [row for _item, row in batch], [item.read_at for item, _row in batch]
    moved = await outcomes.acknowledge(conn, tenant_id, rows, Status.READ, read_ats, notes)
    answers: list[Outcome] = []
    for item, row in batch:
        if row["id"] not in moved:
            answers.append((result(item.text_id, "terminal", row["status"]), None))
            continue
        # fetched -> read fills the transport ack: settle the JetStream copy too (after the
        # commit), here or by the process that handed it out, instead of leaving it to AckWait.
        verb = "ack" if row["status"] == Status.FETCHED else None
        answers.append((result(item.text_id, "ok", Status.READ.value), verb))
    return answers


_BATCHED: dict[str, tuple[One, Many]] = {
    "ack": (_ack_one, _ack_many),
    "read": (_read_one, _read_many),
}


async def ack(svc: DeliveryService, who: AgentPrincipal, items: list[Item]) -> Results:
    results, settles = await _in_round(svc, "ack", Request(who, items))
    await _settle(svc, who, settles)
    return results


async def nak(svc: DeliveryService, who: AgentPrincipal, items: list[Item]) -> Results:
    ((results, settles),) = await _run(svc, who.tenant_id, [Request(who, items)], _nak_one)
    await _settle(svc, who, settles)
    return results


async def term(svc: DeliveryService, who: AgentPrincipal, items: list[Item]) -> Results:
    ((results, settles),) = await _run(svc, who.tenant_id, [Request(who, items)], _term_one)
    await _settle(svc, who, settles)
    return results


async def read(svc: DeliveryService, who: AgentPrincipal, items: list[Item]) -> Results:
    for item in items:
        if item.msg_id is not None and item.subject is None:
            reply = svc.take_handed(who.tenant_id, who.agent_id, item.msg_id)
            if reply is not None:
                with contextlib.suppress(InvalidAckToken):
                    item.subject = parse_ack_subject(reply)
    results, settles = await _in_round(svc, "read", Request(who, items))
    await _settle(svc, who, settles)
    return results
