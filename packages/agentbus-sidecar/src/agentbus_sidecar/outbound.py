"""The outbox, drained to the gateway (05-DELIVERY-SEMANTICS.md §3, §4, §9.1).

Settlements (transport acks, reads, terms, naks) go in batches of at most 500 per route. Sends go
one lane at a time: a lane is (recipient, conversation), and only its oldest queued messages may
be sent, in one request, so a lane reaches the stream in send order (G2). Plain messages of all
lanes share ``POST /v1/messages/batch`` requests of up to 100 envelopes; the gateway takes them
in order and answers AB-2021 for the rest of a lane once one is refused, which stay queued as
they were. Task envelopes go one at a time on their routes. While the loop holds the delivery
WebSocket (``Uplink``), settlements and those batches go as frames on it instead, with the same
bodies, answers and retries. A lane also waits while an earlier
message to the same recipient was accepted without a stream sequence, until ``GET
/v1/messages/{id}`` shows one (checked at most every 2 s); blocking on the recipient rather than
the exact lane is coarser than G2 needs, and keeps that check to what the ``receipts`` table
holds.

Failure handling per 05 §3 step 8: no answer, 5xx and 429 are retried with backoff (never sooner
than ``Retry-After``), and so is a refusal of the caller (AB-10xx); a refused credential is renewed
once by the session; an id dated ahead of the gateway's clock (AB-2009) waits until the gateway
will take it; any other 4xx is final and the row is parked with its error for the agent to see.
"""

from __future__ import annotations

import json
import random
import sqlite3
from collections import defaultdict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from agentbus_sidecar.client import MESSAGES, problem_of, route_for
from agentbus_sidecar.clock import format_ts, parse_ts, server_now
from agentbus_sidecar.errors import GatewayError, GatewayUnreachable
from agentbus_sidecar.ids import id_time
from agentbus_sidecar.runtime import Runtime
from agentbus_sidecar.store import inbox, outbox, receipts, transaction

__all__ = [
    "FlushReport",
    "SendBatch",
    "Settle",
    "Uplink",
    "blocked_recipients",
    "flush_sends",
    "flush_settlements",
    "lane_runs",
    "refresh_unpublished",
]

BATCH = 500
SEND_BATCH = 100
LANE_HELD = "AB-2021"
ID_AHEAD = "AB-2009"
ID_AHEAD_LIMIT = timedelta(minutes=5)
"""How far a message id's time may run ahead of the gateway's clock (conventions §2)."""
ID_AHEAD_MAX_WAIT = timedelta(hours=1)
_TERMINAL = {"read", "expired", "dead_lettered", "discarded", "bridged"}
_VERBS = {outbox.TRANSPORT: "ack", outbox.APPLICATION: "read", outbox.TERM: "term"}


@dataclass
class FlushReport:
    sent: list[str] = field(default_factory=list)
    repeats: dict[str, str] = field(default_factory=dict)
    """Sent task requests the gateway answered as a repeat (04 §6.1): id -> the original
    request's id, whose task and receipt stand; the repeat itself is neither stored nor sent."""
    failed: dict[str, str] = field(default_factory=dict)
    deferred: dict[str, str] = field(default_factory=dict)
    settled: int = 0
    unreachable: str | None = None
    token_refused: GatewayError | None = None
    """The gateway refused this agent's integration token (``GatewayError.token_refused``);
    the sends it refused stay queued for a loop that may outlive a new token."""


def _verb(row_id: str) -> str:
    return "nak" if row_id.startswith("nak:") else _VERBS[row_id.rsplit(":", 1)[1]]


Settle = Callable[[str, list[dict[str, Any]]], Awaitable[list[dict[str, Any]]]]
"""How settlements reach the gateway: ``(verb, items) -> per-item results``."""
SendBatch = Callable[[list[bytes]], Awaitable[list[dict[str, Any]]]]
"""How a batch of plain messages reaches the gateway: ``(envelope bytes) -> per-envelope
results``, as ``POST /v1/messages/batch`` answers."""


@dataclass
class Uplink:
    """The delivery WebSocket as the loop's flusher uses it while the receiver holds one
    (``push``): settlements go as frames, and batches of plain messages as ``send`` frames when
    the gateway's ``hello`` names them. Either one None: HTTP, as without a socket. A frame
    left unanswered (the socket closed, or no answer in time) fails as an unanswered request
    does, so its rows are retried the same way, on HTTP or the next socket."""

    settle: Settle | None = None
    send_batch: SendBatch | None = None

    def clear(self) -> None:
        self.settle = self.send_batch = None


async def flush_settlements(
    rt: Runtime,
    now: datetime,
    report: FlushReport,
    rng: random.Random | None = None,
    *,
    drain: bool = False,
    settle: Settle | None = None,
) -> None:
    """Send due acks, reads, terms and naks; ``drain`` sends all of them, due or not.
    ``settle`` sends them another way than the HTTP routes (the delivery WebSocket)."""

    async def over_http(verb: str, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return await rt.session.call(rt.client.settle, verb, items)

    groups: dict[str, list[sqlite3.Row]] = defaultdict(list)
    upto = parse_ts(outbox.PARKED) if drain else now
    for row in outbox.due(rt.conn, upto, ("ack", "nak")):
        groups[_verb(row["id"])].append(row)
    for verb, rows in groups.items():
        for start in range(0, len(rows), BATCH):
            batch = rows[start : start + BATCH]
            items = [json.loads(bytes(row["body"])) for row in batch]
            try:
                results = await (settle or over_http)(verb, items)
            except (GatewayUnreachable, GatewayError) as exc:
                retry_s = _retry_after_s(exc)
                for row in batch:
                    outbox.record_failure(
                        rt.conn, row["id"], now, str(exc), retry_after_s=retry_s, rng=rng
                    )
                if isinstance(exc, GatewayUnreachable):
                    report.unreachable = str(exc)
                    return
                continue
            by_id = {str(r.get("msg_id")): str(r.get("result")) for r in results}
            for row, item in zip(batch, items, strict=True):
                result = by_id.get(item["msg_id"])
                if result is None:
                    outbox.record_failure(rt.conn, row["id"], now, "no result for this item")
                elif verb == "ack" and result in ("ok", "already_acked"):
                    inbox.mark_transport_acked(rt.conn, item["msg_id"])
                elif verb == "ack" and result == "terminal":
                    inbox.remove(rt.conn, item["msg_id"])
                else:
                    # Reads, terms and naks are settled by any answer; an ``invalid`` transport
                    # ack means a stale token, and the redelivery brings a fresh one.
                    outbox.delete(rt.conn, row["id"])
                report.settled += result is not None


def _retry_after_s(exc: Exception) -> float | None:
    if isinstance(exc, GatewayError) and exc.retry_after_ms is not None:
        return exc.retry_after_ms / 1000
    return None


def blocked_recipients(conn: sqlite3.Connection, now: datetime) -> set[str]:
    """Recipients with a recent accepted message whose stream sequence is still unknown."""
    blocked: set[str] = set()
    horizon = now - timedelta(hours=24)  # the gateway dead-letters unpublished rows by then
    for row in receipts.unpublished(conn):
        events = {e["event"] for e in receipts.events_of(row)}
        if parse_ts(row["accepted_at"]) > horizon and not events & _TERMINAL:
            blocked.add(str(row["to_address"]))
    return blocked


def lane_runs(rows: list[sqlite3.Row], blocked: set[str]) -> list[list[sqlite3.Row]]:
    """The oldest pending sends of every lane whose recipient is not blocked, in send order: the
    lane's head, and while the head and those after it are plain messages, up to ``SEND_BATCH``
    of them (one batch request takes them in order and holds the rest of a lane once one is
    refused). A task envelope goes alone on its route."""
    runs: dict[tuple[str, str], list[sqlite3.Row]] = {}
    closed: set[tuple[str, str]] = set()
    for row in rows:
        envelope: dict[str, Any] = json.loads(bytes(row["body"]))
        lane = (str(envelope["recipient"]), str(envelope["conversation"]))
        if lane[0] in blocked or lane in closed:
            continue
        run = runs.setdefault(lane, [])
        batched = route_for(envelope) == MESSAGES
        if run and (not batched or len(run) >= SEND_BATCH):
            closed.add(lane)
            continue
        run.append(row)
        if not batched:
            closed.add(lane)
    return list(runs.values())


def _requests(runs: list[list[sqlite3.Row]], due_mark: str) -> list[list[sqlite3.Row]]:
    """Due runs packed into requests of at most ``SEND_BATCH`` envelopes, a run never split; a
    run whose head waits (backing off) waits whole."""
    requests: list[list[sqlite3.Row]] = []
    for run in runs:
        if run[0]["next_attempt_at"] > due_mark:
            continue
        single = route_for(json.loads(bytes(run[0]["body"]))) != MESSAGES
        if single or not requests or len(requests[-1]) + len(run) > SEND_BATCH:
            requests.append(list(run))
        else:
            requests[-1].extend(run)
    return requests


async def refresh_unpublished(rt: Runtime, now: datetime) -> None:
    """Ask the gateway for the stream sequence of accepted sends that hold a lane."""
    blocked = blocked_recipients(rt.conn, now)
    for row in receipts.unpublished(rt.conn):
        if str(row["to_address"]) not in blocked:
            continue
        msg_id = str(row["msg_id"])
        try:
            message = await rt.session.call(rt.client.get_message, msg_id)
        except (GatewayUnreachable, GatewayError):
            return
        if isinstance(message.get("stream_seq"), int):
            receipts.set_stream_seq(rt.conn, row["rcp_id"], message["stream_seq"], now)
        elif message.get("status") in _TERMINAL:
            receipts.add_event(rt.conn, row["rcp_id"], str(message["status"]), now)


async def _post(
    rt: Runtime, rows: list[sqlite3.Row], send_batch: SendBatch | None
) -> list[dict[str, Any] | GatewayError]:
    """One request: a task envelope on its route, plain messages as one batch (a ``send`` frame
    with ``send_batch``, else ``POST /v1/messages/batch``); per envelope the answer or its
    refusal. Raises what fails the request as a whole."""
    envelope = json.loads(bytes(rows[0]["body"]))
    route = route_for(envelope)
    if route != MESSAGES:
        try:
            return [await rt.session.call(rt.client.send, route, bytes(rows[0]["body"]))]
        except GatewayError as exc:
            return [exc]
    bodies = [bytes(row["body"]) for row in rows]
    if send_batch is not None:
        results = await send_batch(bodies)
    else:
        results = await rt.session.call(rt.client.send_batch, bodies)
    if len(results) != len(rows):
        raise GatewayError(502, None, None, "the batch answer does not match the request")
    return [r if 200 <= int(r.get("status", 0)) < 300 else problem_of(r) for r in results]


async def flush_sends(
    rt: Runtime,
    now: datetime,
    report: FlushReport,
    rng: random.Random | None = None,
    *,
    send_batch: SendBatch | None = None,
) -> None:
    """Send the due sends lane by lane; ``send_batch`` sends the batches of plain messages
    another way than ``POST /v1/messages/batch`` (``send`` frames on the delivery
    WebSocket)."""
    due_mark = format_ts(now)
    runs = lane_runs(outbox.pending_sends(rt.conn), blocked_recipients(rt.conn, now))
    for rows in _requests(runs, due_mark):
        answers: list[dict[str, Any] | GatewayError] = []
        if report.unreachable is None:
            try:
                answers = await _post(rt, rows, send_batch)
            except GatewayUnreachable as exc:
                report.unreachable = str(exc)
            except GatewayError as exc:
                answers = [exc] * len(rows)
        if not answers:  # unreachable, now or earlier in this flush
            for row in rows:
                unreachable = str(report.unreachable)
                outbox.record_failure(rt.conn, str(row["id"]), now, unreachable, rng=rng)
                report.deferred[str(row["id"])] = unreachable
            continue
        for row, answer in zip(rows, answers, strict=True):
            if isinstance(answer, GatewayError):
                refused(rt, str(row["id"]), answer, now, report, rng)
            else:
                _accepted(rt, row, answer, now)
                report.sent.append(str(row["id"]))
                if isinstance(original := answer.get("duplicate_of"), str):
                    report.repeats[str(row["id"])] = original


def refused(
    rt: Runtime,
    msg_id: str,
    exc: GatewayError,
    now: datetime,
    report: FlushReport,
    rng: random.Random | None,
) -> None:
    """What becomes of a send the gateway refused: tried again later when the refusal was not
    about the envelope (lane held, 429 and 5xx, a refused caller) or the gateway will take it
    later (an id minted ahead of its clock), parked for good otherwise."""
    wait_for_id = id_ahead_wait(msg_id, server_now()) if exc.code == ID_AHEAD else None
    if exc.token_refused:
        report.token_refused = exc
    if exc.code == LANE_HELD:  # not tried: goes again, after its lane's head
        report.deferred[msg_id] = str(exc)
    elif exc.retryable or exc.caller_refused or wait_for_id is not None:
        retry_after_s = _retry_after_s(exc) if wait_for_id is None else wait_for_id.total_seconds()
        outbox.record_failure(rt.conn, msg_id, now, str(exc), retry_after_s=retry_after_s, rng=rng)
        report.deferred[msg_id] = str(exc)
    else:
        outbox.park(rt.conn, msg_id, str(exc))
        report.failed[msg_id] = str(exc)


def id_ahead_wait(msg_id: str, gateway_now: datetime) -> timedelta | None:
    """How long until the gateway takes an id it refused as minted too far ahead of its clock
    (AB-2009), by the clock that refusal has just corrected (the id was minted while a stale
    offset was stored). None past an hour: a clock that far off needs a person, so the send is
    parked for the agent to see."""
    wait = id_time(msg_id) - ID_AHEAD_LIMIT - gateway_now + timedelta(seconds=1)
    return max(wait, timedelta(0)) if wait <= ID_AHEAD_MAX_WAIT else None


def _accepted(rt: Runtime, row: sqlite3.Row, answer: dict[str, Any], now: datetime) -> None:
    msg_id = str(row["id"])
    envelope: dict[str, Any] = json.loads(bytes(row["body"]))
    receipt = answer.get("receipt") or {}
    accepted_at = (answer.get("message") or {}).get("accepted_at") or format_ts(now)
    with transaction(rt.conn):
        if isinstance(receipt.get("id"), str):
            receipts.record(
                rt.conn,
                receipt,
                {**envelope, "id": receipt.get("msg_id", msg_id)},
                queued_at=str(row["created_at"]),
                accepted_at=str(accepted_at),
            )
        outbox.delete(rt.conn, msg_id)
