"""Where messages are (04-API-SPEC §4.3-4.5). A message's trace and receipts are for its sender
and recipient, and for the operators of its tenant (an integration token with ``read_audit`` or
``admin``); AB-8002 for anyone else, as for a message that does not exist. The messages of a
trace id: an agent sees those it sent or received, an operator those of its tenant. The tenant's
message list, newest first and filtered by status, sender and recipient (to find dead letters
and why), is for operators.

The data model keeps the full timeline of a message in ClickHouse ``events``; this deployment
keeps that table in PostgreSQL (docs/decisions/0047), so traces answer from there
(``"source": "postgres"``): every transition of the message as it happened (accepted,
published with its sequence, each fetch with its attempt, naks, delivered, read, expired,
dead-lettered with its reason, redriven with the new sequence, discarded), and a task request's
``task_transitions``. The recipient's ``delivery_state`` is added as the current state
(``delivery``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from platformkit.db.scope import tenant_transaction

from agentbus.db import SCOPE
from agentbus.delivery import events
from agentbus.delivery import store as delivery_store
from agentbus.delivery.domain import Status
from agentbus.errors import NotFound, RequestInvalid
from agentbus.gateway.actions.messages import find_visible_message, message_id_of
from agentbus.gateway.actions.receipts import find_kid, receipt_view
from agentbus.gateway.api.auth import Reader
from agentbus.gateway.api.principals import AgentPrincipal
from agentbus.gateway.api.views import message_view, ts
from agentbus.gateway.context import Gateway
from agentbus.gateway.domain import cursors
from agentbus.gateway.store import messages, receipts
from agentbus.ids import InvalidId, format_id, parse_id
from agentbus.tasks import store as task_store
from agentbus.tasks.domain import REQUEST_TYPE

Row = dict[str, Any]
SOURCE = "postgres"
TRACE_MESSAGES_MAX = 1000
LIST_MAX = 200
LIST_CURSOR = "ml"
_TRACE_ID = re.compile(r"^[0-9a-f]{32}$")
BUDGET_REASON = "budget_exceeded"


def timeline(events: Sequence[Row], transitions: Sequence[Row]) -> list[dict[str, Any]]:
    """The message's events and, for a task request, its task's state changes, oldest first,
    each with the milliseconds since the one before (``latency_ms``, null for the first)."""
    steps: list[tuple[datetime, str, str, int, str | None, dict[str, Any]]] = []
    for row in events:
        details = dict(row["details"])
        if row["policy_id"] is not None:
            details["policy_id"] = format_id("pol", row["policy_id"])
        steps.append((row["event_time"], row["event"], row["actor"], int(row["attempt"]),
                      row["error_code"], details))  # fmt: skip
    for move in transitions:
        by = move["by_msg_id"]
        details = {"from": move["from_state"], "to": move["to_state"], "reason": move["reason"],
                   "by_msg_id": None if by is None else format_id("msg", by)}  # fmt: skip
        if (move["reason"] or "").startswith(BUDGET_REASON):  # the stop of decisions/0031
            steps.append((move["at"], "task.budget_exceeded", "gateway", 0, None,
                          {"reason": move["reason"]}))  # fmt: skip
        steps.append((move["at"], "task.state_changed", "gateway", 0, None, details))
    steps.sort(key=lambda step: step[0])  # stable: equal times keep the order above
    out: list[dict[str, Any]] = []
    previous: datetime | None = None
    for at, event, actor, attempt, error_code, details in steps:
        since = None if previous is None else (at - previous) // timedelta(milliseconds=1)
        out.append({"event": event, "at": ts(at), "attempt": attempt, "actor": actor,
                    "latency_ms": since, "error_code": error_code, "details": details})  # fmt: skip
        previous = at
    return out


def delivery_view(delivery: Row | None) -> dict[str, Any] | None:
    if delivery is None:
        return None
    return {
        "attempt": delivery["attempt"],
        "last_fetched_at": ts(delivery["last_fetched_at"]),
        "transport_acked_at": ts(delivery["transport_acked_at"]),
        "application_acked_at": ts(delivery["application_acked_at"]),
        "nak_until": ts(delivery["nak_until"]),
        "dlq_reason": delivery["dlq_reason"],
    }


async def read_trace(gw: Gateway, who: Reader, text: str) -> dict[str, Any]:
    """``GET /v1/messages/{msg}/trace``."""
    msg_id = message_id_of(text)
    async with tenant_transaction(gw.pool, SCOPE, who.tenant_id) as conn:
        row = await find_visible_message(conn, who, msg_id)
        issued = await receipts.receipts_of(conn, who.tenant_id, msg_id)
        history = await events.message_events(conn, who.tenant_id, msg_id)
        delivery = None
        if row["to_agent_id"] is not None:
            delivery = await delivery_store.delivery_state(conn, msg_id, row["to_agent_id"])
        transitions: list[Row] = []
        if row["type"] == REQUEST_TYPE:  # the task shares the request's uuid
            transitions = await task_store.list_transitions(conn, who.tenant_id, msg_id)
    return {
        "message": message_view(row),
        "delivery": delivery_view(delivery),
        "receipts": [receipt_view(r, find_kid(gw.signing, r)) for r in issued],
        "events": timeline(history, transitions),
        "source": SOURCE,
    }


async def read_receipt(gw: Gateway, who: Reader, text: str) -> dict[str, Any]:
    """``GET /v1/receipts/{rcp}``: the receipt, whether its signature checks against the
    platform's keys, and its message's current status."""
    try:
        receipt_id = parse_id("rcp", text)
    except InvalidId as exc:
        raise NotFound(f"no receipt {text}") from exc
    async with tenant_transaction(gw.pool, SCOPE, who.tenant_id) as conn:
        row = await receipts.get_receipt(conn, who.tenant_id, receipt_id)
        if row is None:
            raise NotFound(f"no receipt {text}")
        try:
            message = await find_visible_message(conn, who, row["msg_id"])
        except NotFound as exc:
            raise NotFound(f"no receipt {text}") from exc
    kid = find_kid(gw.signing, row)
    return {
        "receipt": receipt_view(row, kid),
        "verified": kid is not None,
        "message_status": message["status"],
    }


async def read_trace_messages(gw: Gateway, who: Reader, trace_id: str) -> dict[str, Any]:
    """``GET /v1/traces/{trace_id}``: the messages of one trace the reader may see (an agent's
    own, or those of an operator's tenant or workspace), oldest first."""
    if not _TRACE_ID.match(trace_id):
        raise NotFound(f"no trace {trace_id}")
    if isinstance(who, AgentPrincipal):
        party, workspace_id = who.agent_id, None
    else:
        party, workspace_id = None, who.workspace_id
    async with tenant_transaction(gw.pool, SCOPE, who.tenant_id) as conn:
        rows = await messages.by_trace(
            conn, who.tenant_id, trace_id, party=party, workspace_id=workspace_id,
            limit=TRACE_MESSAGES_MAX,
        )  # fmt: skip
    return {"trace_id": trace_id, "messages": [message_view(row) for row in rows]}


def _agent_filter(name: str, text: str | None) -> Any:
    try:
        return None if text is None else parse_id("agt", text)
    except InvalidId as exc:
        raise RequestInvalid(f"{name} takes an agent id (agt_...)", field=name) from exc


async def list_messages(
    gw: Gateway,
    who: Reader,
    *,
    status: str | None = None,
    sender: str | None = None,
    recipient: str | None = None,
    limit: int = 50,
    cursor: str | None = None,
) -> dict[str, Any]:
    """``GET /v1/messages``: metadata and ``dlq_reason``, newest first, a page at a time. An
    agent sees the messages it sent or received (a sidecar restoring its inbox lists what it
    was delivered and has not read); a token bound to a workspace sees that workspace's."""
    if status is not None and status not in set(Status):
        raise RequestInvalid(f"status takes one of {', '.join(Status)}", field="status")
    party = who.agent_id if isinstance(who, AgentPrincipal) else None
    filters = {
        "party_agent_id": party,
        "workspace_id": None if party else who.workspace_id,
        "status": status,
        "from_agent_id": _agent_filter("from", sender),
        "to_agent_id": _agent_filter("to", recipient),
    }
    limit, before = max(1, min(limit, LIST_MAX)), cursors.decode(LIST_CURSOR, cursor)
    async with tenant_transaction(gw.pool, SCOPE, who.tenant_id) as conn:
        rows = await messages.list_messages(
            conn, who.tenant_id, filters=filters, before=before, limit=limit
        )
    return {
        "items": [{**message_view(row), "dlq_reason": row["dlq_reason"]} for row in rows],
        "next_cursor": cursors.after_page(LIST_CURSOR, rows, limit),
    }
