"""Accepting a validated send (05-DELIVERY-SEMANTICS §3 steps 3-7): seal and store the payload,
insert the conversation (if new), the ``messages`` row and the task rows in one transaction,
then, after the commit, publish, and record the sequence and the signed receipt in one more
transaction. A concurrent twin with the same id that committed first turns this into a replay.

``send_envelope`` runs ``insert_send`` in the same transaction that validated the envelope (a
refused envelope raises before anything is stored, and the rollback leaves nothing behind);
``accept_send`` is the same with a transaction of its own."""

from __future__ import annotations

from typing import Any

import psycopg
from platformkit.db.scope import Conn, tenant_transaction

from agentbus.db import SCOPE
from agentbus.gateway.context import Gateway
from agentbus.gateway.conversations import join_conversation
from agentbus.gateway.hooks import PendingSend, SendResult, TaskRules
from agentbus.gateway.payloads import store_payload
from agentbus.gateway.publish import publish_message, record_stream_seq
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


async def insert_send(
    conn: Conn, gw: Gateway, send: PendingSend, rules: TaskRules | None
) -> dict[str, Any] | None:
    """Steps 3-4 inside the caller's transaction (the one that validated the send): seal and
    store the payload, insert the conversation (if new), the ``messages`` row and the task
    rows; the response's ``task`` member. A unique violation on the message id (a concurrent
    twin committed first) propagates, and the caller answers with a replay."""
    env, principal, tid = send.envelope, send.principal, send.tenant_id
    assert send.recipient is not None
    payload_ref, dek_version = await store_payload(conn, gw, tid, env.msg_id, send.plaintext)
    if send.conversation is None:
        title = env.data.get("title") if env.type in (MESSAGE, TASK_REQUEST) else None
        send.conversation = await join_conversation(
            conn, env.conversation_id, send.sender, send.recipient, title, create=True
        )
    values = _row_values(send, payload_ref, dek_version)
    inserted = await messages.insert_message(conn, tid, values)
    send.message = {
        **values, **inserted, "tenant_id": tid, "status": "accepted", "stream_seq": None,
        "from_address": principal.address, "to_subject": send.recipient["inbox_subject"],
    }  # fmt: skip
    return None if rules is None else await rules.apply(conn, send)


def is_id_conflict(exc: psycopg.errors.UniqueViolation) -> bool:
    return exc.diag.constraint_name in ("messages_id_uq", "messages_pkey")


async def replay_twin(gw: Gateway, send: PendingSend, rules: TaskRules | None) -> SendResult:
    """A concurrent twin with the same id committed first: answer as its replay."""
    tid = send.tenant_id
    async with tenant_transaction(gw.pool, SCOPE, tid) as conn:
        existing = await messages.find_message(conn, tid, send.envelope.msg_id)
    assert existing is not None
    return await replay_send(gw, send.principal, send.envelope, existing, rules)


async def accept_send(gw: Gateway, send: PendingSend, rules: TaskRules | None) -> SendResult:
    """Steps 3-7 in a write transaction of their own (after a separate validation)."""
    try:
        async with tenant_transaction(gw.pool, SCOPE, send.tenant_id) as conn:
            send.conversation = None  # re-read under this transaction
            task = await insert_send(conn, gw, send, rules)
    except psycopg.errors.UniqueViolation as exc:
        if not is_id_conflict(exc):
            raise
        return await replay_twin(gw, send, rules)
    return await finish_send(gw, send, task)


async def finish_send(gw: Gateway, send: PendingSend, task: dict[str, Any] | None) -> SendResult:
    """Steps 5-7 after the commit of the ``messages`` row: publish, then record the sequence
    and the signed receipt in one transaction."""
    env, principal, tid = send.envelope, send.principal, send.tenant_id
    seq = await publish_message(gw, send.message, record_seq=False)
    async with tenant_transaction(gw.pool, SCOPE, tid) as conn, conn.pipeline():
        # one round trip for both statements; the receipt's fetch ends the pipeline batch
        if seq is not None:
            await record_stream_seq(conn, send.message, seq)
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
