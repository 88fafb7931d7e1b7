"""Accepting a validated send (05-DELIVERY-SEMANTICS §3 steps 3-7): seal and store the payload,
insert the conversation (if new), the ``messages`` row and the task rows in one transaction,
then, after the commit, publish and sign the receipt. A concurrent twin with the same id that
committed first turns this into a replay."""

from __future__ import annotations

from typing import Any

import psycopg
from platformkit.db.scope import tenant_transaction

from agentbus.db import SCOPE
from agentbus.gateway.context import Gateway
from agentbus.gateway.conversations import join_conversation
from agentbus.gateway.hooks import PendingSend, SendResult, TaskRules
from agentbus.gateway.payloads import store_payload
from agentbus.gateway.publish import publish_message
from agentbus.gateway.receipts import issue_receipt
from agentbus.gateway.replay import replay_send
from agentbus.gateway.schemas import MESSAGE, TASK_REQUEST
from agentbus.gateway.store import messages
from agentbus.gateway.views import ts


def _row_values(send: PendingSend, payload_ref: str, dek_version: int) -> dict[str, Any]:
    env = send.envelope
    assert send.recipient is not None
    assert send.conversation is not None
    budget = env.data.get("budget") if env.type == TASK_REQUEST else None
    return {
        "id": env.msg_id,
        "workspace_id": send.conversation["workspace_id"],
        "conversation_id": env.conversation_id,
        "type": env.type,
        "schema_url": env.raw["dataschema"],
        "from_agent_id": send.principal.agent_id,
        "to_agent_id": send.recipient["id"],
        "to_address": env.raw["recipient"],
        "correlation_id": env.correlation_id,
        "reply_to": env.get("replyto"),
        "idempotency_key": env.get("idempotencykey"),
        "capability": env.get("capability"),
        "capability_ver": env.get("capabilityver"),
        "priority": env.raw["priority"],
        "budget": budget,
        "expires_at": env.expires_at,
        "traceparent": env.raw["traceparent"],
        "sig": env.signature,
        "signing_key_id": env.key_id,
        "payload_ref": payload_ref,
        "payload_bytes": len(send.plaintext),
        "payload_sha256": send.payload_sha256,
        "dek_version": dek_version,
    }


async def accept_send(gw: Gateway, send: PendingSend, rules: TaskRules | None) -> SendResult:
    env, principal, tid = send.envelope, send.principal, send.tenant_id
    payload_ref, dek_version = await store_payload(gw, tid, env.msg_id, send.plaintext)
    title = env.data.get("title") if env.type in (MESSAGE, TASK_REQUEST) else None
    task: dict[str, Any] | None = None
    try:
        async with tenant_transaction(gw.pool, SCOPE, tid) as conn:
            assert send.recipient is not None
            send.conversation = await join_conversation(
                conn, env.conversation_id, send.sender, send.recipient, title, create=True
            )
            values = _row_values(send, payload_ref, dek_version)
            inserted = await messages.insert_message(conn, tid, values)
            send.message = {
                **values, **inserted, "tenant_id": tid, "status": "accepted", "stream_seq": None,
                "from_address": principal.address, "to_subject": send.recipient["inbox_subject"],
            }  # fmt: skip
            if rules is not None:
                task = await rules.apply(conn, send)
    except psycopg.errors.UniqueViolation as exc:
        if exc.diag.constraint_name not in ("messages_id_uq", "messages_pkey"):
            raise
        async with tenant_transaction(gw.pool, SCOPE, tid) as conn:  # a concurrent twin won
            existing = await messages.find_message(conn, tid, env.msg_id)
        assert existing is not None
        return await replay_send(gw, principal, env, existing, rules)
    seq = await publish_message(gw, send.message)
    async with tenant_transaction(gw.pool, SCOPE, tid) as conn:
        receipt = await issue_receipt(conn, gw.signing, tid, env.msg_id, seq, principal.token_id)
    body: dict[str, Any] = {
        "receipt": receipt,
        "message": {
            "id": env.raw["id"],
            "status": "accepted",
            "conversation": env.raw["conversation"],
            "accepted_at": ts(send.message["accepted_at"]),
        },
    }
    if task is not None:
        body["task"] = task
    return SendResult(202, body)
