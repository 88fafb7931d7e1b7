"""Idempotent sends (04-API-SPEC §4.2): the envelope id exists already.

Ed25519 is deterministic, so an equal ``sig`` means the same envelope: answer ``200`` with
``Idempotent-Replayed: true``. A row still without a sequence is published first (05 §14.2).
The last receipt is returned when it carries the row's current ``stream_seq``; otherwise (it
was issued with ``seq: null`` and the message has been published since) a new one is issued.
The send path compares the signatures first (``send._send``): another envelope under the same
id is AB-2016 there and never reaches a replay.
"""

from __future__ import annotations

from typing import Any

from platformkit.db.scope import tenant_transaction

from agentbus.db import SCOPE
from agentbus.gateway.actions.hooks import SendResult, TaskRules
from agentbus.gateway.actions.publish import publish_message
from agentbus.gateway.actions.receipts import find_kid, issue_receipt, receipt_view
from agentbus.gateway.api.principals import AgentPrincipal
from agentbus.gateway.api.views import ts
from agentbus.gateway.context import Gateway
from agentbus.gateway.domain.envelope import Parsed
from agentbus.gateway.store import receipts
from agentbus.ids import format_id

REPLAYED_HEADER = "Idempotent-Replayed"


async def replay_send(
    gw: Gateway,
    principal: AgentPrincipal,
    env: Parsed,
    existing: dict[str, Any],
    rules: TaskRules | None,
) -> SendResult:
    if existing["stream_seq"] is None and existing["status"] == "accepted":
        await publish_message(gw, existing)
    tid, msg_id = principal.tenant_id, existing["id"]
    task: dict[str, Any] | None = None
    async with tenant_transaction(gw.pool, SCOPE, tid) as conn:
        seq = existing["stream_seq"]
        last = await receipts.latest_receipt(conn, tid, msg_id)
        if last is not None and last["stream_seq"] == seq:
            receipt = receipt_view(last, find_kid(gw.signing, last))
        else:
            receipt = await issue_receipt(conn, gw.signing, tid, msg_id, seq, principal.token_id)
        if rules is not None:
            task = await rules.describe(conn, existing)
    body: dict[str, Any] = {
        "receipt": receipt,
        "message": {
            "id": format_id("msg", msg_id),
            "status": existing["status"],
            "conversation": format_id("cnv", existing["conversation_id"]),
            "accepted_at": ts(existing["accepted_at"]),
        },
    }
    if task is not None:
        body["task"] = task
    headers = {REPLAYED_HEADER: "true", **env.trace_headers}
    return SendResult(200, body, replayed=True, headers=headers)
