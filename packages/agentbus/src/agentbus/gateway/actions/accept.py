"""Accepting a validated send (05-DELIVERY-SEMANTICS §3 steps 3-7): seal and store the payload,
insert the conversation (if new), the ``messages`` row and the task rows in one transaction,
then, after the commit, publish, and record the sequences and the signed receipts in one more
statement, its own transaction. A batch of sends shares both.

``send_envelope`` runs ``insert_send`` in the same transaction that validated the envelope (a
refused envelope raises before anything is stored, and the rollback leaves nothing behind). A
concurrent twin with the same id waits on the id's lock taken during validation
(``messages.claim_ids``) and is answered as a replay of the first."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from typing import Any

from platformkit.db.scope import Conn

from agentbus.gateway.actions.blobs import reference_attachments
from agentbus.gateway.actions.conversations import join_conversation
from agentbus.gateway.actions.hooks import PendingSend, SendResult, TaskRules
from agentbus.gateway.actions.payloads import INLINE_MAX_BYTES, seal_payload
from agentbus.gateway.actions.publish import ensure_tenant_stream, publish_message
from agentbus.gateway.actions.receipts import ReceiptFor, sign_receipts
from agentbus.gateway.api.principals import AgentPrincipal
from agentbus.gateway.api.views import ts
from agentbus.gateway.context import Gateway
from agentbus.gateway.domain.schemas import MESSAGE, TASK_REQUEST
from agentbus.gateway.metrics import PUBLISH_UNCONFIRMED
from agentbus.gateway.store import messages

Task = dict[str, Any] | None
"""The ``task`` member of a send's response (None for a plain message)."""


def _row_values(send: PendingSend, payload_ref: str, dek_version: int) -> dict[str, Any]:
    env = send.envelope
    assert send.recipient is not None
    assert send.conversation is not None
    assert send.accepted_at is not None
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
        "accepted_at": send.accepted_at,
    }


async def insert_send(
    conn: Conn,
    gw: Gateway,
    send: PendingSend,
    rules: TaskRules | None,
    uploads: list[tuple[str, bytes]],
    rows: list[dict[str, Any]],
) -> dict[str, Any] | None:
    """Steps 3-4 inside the caller's transaction (the one that validated the send): seal the
    payload and add it to ``uploads`` (the caller stores them all before the commit),
    insert the conversation (if new) and a task's rows, and add the ``messages`` row to
    ``rows``, which the caller inserts together (``insert_rows``) before the commit and before
    the checks of a later task send, which read earlier requests' rows; the response's
    ``task`` member. A database error (none is expected: the id's lock keeps concurrent twins
    apart) propagates and fails the request."""
    env, principal, tid = send.envelope, send.principal, send.tenant_id
    assert send.recipient is not None
    await reference_attachments(conn, send)
    payload_ref, sealed, dek_version = await seal_payload(conn, gw, tid, env.msg_id, send.plaintext)
    uploads.append((payload_ref, sealed))
    if gw.settings.inline_payloads and len(sealed) < INLINE_MAX_BYTES:
        send.inline = sealed
    if send.conversation is None:
        title = env.data.get("title") if env.type in (MESSAGE, TASK_REQUEST) else None
        send.conversation = await join_conversation(
            conn, env.conversation_id, send.sender, send.recipient, title
        )
    values = _row_values(send, payload_ref, dek_version)
    send.message = {
        **values, "tenant_id": tid, "status": "accepted", "stream_seq": None,
        "from_address": principal.address, "to_subject": send.recipient["inbox_subject"],
    }  # fmt: skip
    task = None if rules is None else await rules.apply(conn, send)
    rows.append(values)  # after the task rules, which may still refuse the send
    return task


async def insert_rows(conn: Conn, tenant_id: uuid.UUID, rows: list[dict[str, Any]]) -> None:
    """The ``messages`` rows ``insert_send`` collected, in one statement; ``rows`` is emptied."""
    await messages.insert_messages(conn, tenant_id, rows)
    rows.clear()


async def finish_sends(
    gw: Gateway, principal: AgentPrincipal, accepted: list[tuple[PendingSend, Task]]
) -> list[SendResult]:
    """Steps 5-7 after the commit of the ``messages`` rows: publish them all (in order, on one
    NATS connection, without waiting for one PubAck before the next publish), then record every
    sequence and signed receipt in one statement, shared with the sends of other agents of the
    tenant that finish at the same moment (``gw.receipts``). ``accepted`` pairs a send with the
    response's ``task`` member."""
    # The stream first, once: with nothing left to wait for before its write, each publish
    # below reaches the connection in the order of ``accepted``, which is the lanes' order.
    with contextlib.suppress(Exception):  # not ready: each publish says so and returns None
        await ensure_tenant_stream(gw, principal.tenant_id)
    seqs = await asyncio.gather(
        *(
            publish_message(gw, send.message, record_seq=False, sealed=send.inline)
            for send, _ in accepted
        )
    )
    PUBLISH_UNCONFIRMED.inc(sum(1 for seq in seqs if seq is None))
    items = [
        ReceiptFor(send.envelope.msg_id, seq, send.message["accepted_at"])
        for (send, _), seq in zip(accepted, seqs, strict=True)
    ]
    rows, receipts = sign_receipts(gw.signing, principal.token_id, items)
    await gw.receipts.record(principal.tenant_id, rows)
    results = []
    for (send, task), seq, receipt in zip(accepted, seqs, receipts, strict=True):
        env = send.envelope
        send.message["stream_seq"] = seq
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
        results.append(SendResult(202, body, headers=env.trace_headers))
    return results
