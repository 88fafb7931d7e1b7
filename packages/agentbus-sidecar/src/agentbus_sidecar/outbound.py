"""The outbox, drained to the gateway (05-DELIVERY-SEMANTICS.md §3, §4, §9.1).

Settlements (transport acks, reads, terms, naks) go in batches of at most 500 per route. Sends go
one lane at a time: a lane is (recipient, conversation), and only its oldest queued message may be
sent, so a lane reaches the stream in send order (G2). A lane also waits while an earlier message
to the same recipient was accepted without a stream sequence, until ``GET /v1/messages/{id}``
shows one (checked at most every 2 s); blocking on the recipient rather than the exact lane is
coarser than G2 needs, and keeps that check to what the ``receipts`` table holds.

Failure handling per 05 §3 step 8: no answer, 5xx and 429 are retried with backoff (never sooner
than ``Retry-After``); a refused credential is renewed once by the session; any other 4xx is final
and the row is parked with its error for the agent to see.
"""

from __future__ import annotations

import json
import random
import sqlite3
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from agentbus_sidecar.client import route_for
from agentbus_sidecar.clock import format_ts, parse_ts
from agentbus_sidecar.errors import GatewayError, GatewayUnreachable
from agentbus_sidecar.runtime import Runtime
from agentbus_sidecar.store import inbox, outbox, receipts, transaction

__all__ = [
    "FlushReport",
    "blocked_recipients",
    "flush_sends",
    "flush_settlements",
    "lane_heads",
    "refresh_unpublished",
]

BATCH = 500
_TERMINAL = {"read", "expired", "dead_lettered", "discarded", "bridged"}
_VERBS = {outbox.TRANSPORT: "ack", outbox.APPLICATION: "read", outbox.TERM: "term"}


@dataclass
class FlushReport:
    sent: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)
    deferred: dict[str, str] = field(default_factory=dict)
    settled: int = 0
    unreachable: str | None = None


def _verb(row_id: str) -> str:
    return "nak" if row_id.startswith("nak:") else _VERBS[row_id.rsplit(":", 1)[1]]


async def flush_settlements(
    rt: Runtime,
    now: datetime,
    report: FlushReport,
    rng: random.Random | None = None,
    *,
    drain: bool = False,
) -> None:
    """Send due acks, reads, terms and naks; ``drain`` sends all of them, due or not."""
    groups: dict[str, list[sqlite3.Row]] = defaultdict(list)
    upto = parse_ts(outbox.PARKED) if drain else now
    for row in outbox.due(rt.conn, upto, ("ack", "nak")):
        groups[_verb(row["id"])].append(row)
    for verb, rows in groups.items():
        for start in range(0, len(rows), BATCH):
            batch = rows[start : start + BATCH]
            items = [json.loads(bytes(row["body"])) for row in batch]
            try:
                results = await rt.session.call(rt.client.settle, verb, items)
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


def lane_heads(rows: list[sqlite3.Row], blocked: set[str]) -> list[sqlite3.Row]:
    """The oldest pending send of every lane whose recipient is not blocked."""
    heads: dict[tuple[str, str], sqlite3.Row] = {}
    for row in rows:
        envelope: dict[str, Any] = json.loads(bytes(row["body"]))
        lane = (str(envelope["recipient"]), str(envelope["conversation"]))
        if lane not in heads:
            heads[lane] = row
    return [row for (recipient, _), row in heads.items() if recipient not in blocked]


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


async def flush_sends(
    rt: Runtime, now: datetime, report: FlushReport, rng: random.Random | None = None
) -> None:
    due_mark = format_ts(now)
    heads = lane_heads(outbox.pending_sends(rt.conn), blocked_recipients(rt.conn, now))
    for row in heads:
        if row["next_attempt_at"] > due_mark:
            continue
        msg_id, body = str(row["id"]), bytes(row["body"])
        if report.unreachable is not None:
            outbox.record_failure(rt.conn, msg_id, now, report.unreachable, rng=rng)
            report.deferred[msg_id] = report.unreachable
            continue
        envelope: dict[str, Any] = json.loads(body)
        try:
            answer = await rt.session.call(rt.client.send, route_for(envelope), body)
        except GatewayUnreachable as exc:
            report.unreachable = str(exc)
            outbox.record_failure(rt.conn, msg_id, now, str(exc), rng=rng)
            report.deferred[msg_id] = str(exc)
            continue
        except GatewayError as exc:
            if exc.retryable:
                retry_s = _retry_after_s(exc)
                outbox.record_failure(
                    rt.conn, msg_id, now, str(exc), retry_after_s=retry_s, rng=rng
                )
                report.deferred[msg_id] = str(exc)
            else:
                outbox.park(rt.conn, msg_id, str(exc))
                report.failed[msg_id] = str(exc)
            continue
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
        report.sent.append(msg_id)
