"""Task verbs (conventions §3.3, §4; 04-API-SPEC.md §6): a request, then lifecycle messages.

Lifecycle messages go to the other party of the task, in the task's conversation, correlated
with the request and continuing its trace. That context comes from the request envelope: our
inbox holds it when we are the recipient, the outbox while our own request is still queued, and
otherwise the gateway (``GET /v1/messages/{request}``).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from agentbus_sidecar.actions.sending import SendOutcome, message_context, queue_and_try, signed
from agentbus_sidecar.adapters.usage import current_task, set_current_task
from agentbus_sidecar.envelope import TASK_REQUEST, TASK_VERBS, new_traceparent
from agentbus_sidecar.errors import EnvelopeError
from agentbus_sidecar.ids import request_msg_id_for
from agentbus_sidecar.runtime import Runtime

__all__ = ["request_task", "update_task"]

REQUESTER_VERBS = frozenset({"cancel"})
# Verbs after which the recipient is working on the task: its usage records name the task
# (adapters.usage); any other verb on it ends that.
WORKING = frozenset({"accept", "progress"})


async def request_task(
    rt: Runtime,
    recipient: str,
    data: dict[str, Any],
    *,
    capability: str,
    capability_ver: str | None = None,
    idempotency_key: str | None = None,
    conversation: str | None = None,
    priority: str = "normal",
    expires: datetime | None = None,
) -> SendOutcome:
    """Ask ``recipient`` for work; the key defaults to the request's own message id."""
    envelope = signed(
        rt,
        type=TASK_REQUEST,
        recipient=recipient,
        data=data,
        capability=capability,
        capability_ver=capability_ver,
        idempotency_key=idempotency_key,
        conversation=conversation,
        priority=priority,
        expires=expires,
    )
    return await queue_and_try(rt, envelope)


async def update_task(rt: Runtime, task_id: str, verb: str, data: dict[str, Any]) -> SendOutcome:
    if verb not in TASK_VERBS:
        raise EnvelopeError(f"unknown task verb {verb!r}")
    try:
        request_id = request_msg_id_for(task_id)
    except ValueError as exc:
        raise EnvelopeError(str(exc)) from exc
    ctx = await message_context(rt, request_id)
    requester, recipient = ctx["from"], ctx["to"]
    if verb in REQUESTER_VERBS and requester != rt.address:
        raise EnvelopeError(f"only the requester {requester} may {verb} {task_id} (AB-6005)")
    if verb not in REQUESTER_VERBS and recipient != rt.address:
        raise EnvelopeError(f"only the recipient {recipient} may {verb} {task_id} (AB-6005)")
    envelope = signed(
        rt,
        type=f"agentbus.task.{verb}.v1",
        subject=task_id,
        correlation=request_id,
        recipient=recipient if verb in REQUESTER_VERBS else requester,
        data=data,
        conversation=ctx["conversation"],
        traceparent=new_traceparent(ctx["trace_id"]),
    )
    outcome = await queue_and_try(rt, envelope)
    if outcome.state != "failed" and verb in WORKING:
        set_current_task(rt.conn, task_id)
    elif outcome.state != "failed" and current_task(rt.conn) == task_id:
        set_current_task(rt.conn, None)
    return outcome
