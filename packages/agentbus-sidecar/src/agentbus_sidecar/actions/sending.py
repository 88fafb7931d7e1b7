"""Sending: build, sign, queue in the outbox, then try at once (05-DELIVERY-SEMANTICS.md §3).

The outbox row is written before any network call, so a message is never lost to a crash or an
unreachable gateway: if the immediate try does not get a receipt, the sidecar loop (or the next
command) sends the same bytes later.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from agentbus_sidecar.clock import utcnow
from agentbus_sidecar.envelope import MESSAGE, build_envelope, new_traceparent, sign_envelope
from agentbus_sidecar.errors import ConfigError, GatewayError, GatewayUnreachable, SidecarError
from agentbus_sidecar.ids import task_id_for
from agentbus_sidecar.runtime import Runtime
from agentbus_sidecar.store import inbox, outbox, receipts
from agentbus_sidecar.sync import flush

__all__ = [
    "SendOutcome",
    "ack_messages",
    "message_context",
    "queue_and_try",
    "reply_message",
    "send_message",
    "signed",
]


@dataclass
class SendOutcome:
    envelope: dict[str, Any]
    state: str  # sent, queued or failed
    detail: str | None = None
    receipt: dict[str, Any] | None = None
    repeat_of: str | None = None  # a task request answered as a repeat of this earlier one

    @property
    def task_id(self) -> str | None:
        """The task of a task envelope (``subject``); for a repeated request, the task its
        original created."""
        if self.repeat_of is not None:
            return task_id_for(self.repeat_of)
        subject = self.envelope.get("subject")
        return subject if isinstance(subject, str) else None

    def as_dict(self) -> dict[str, Any]:
        return {
            "msg_id": self.envelope["id"],
            "conversation": self.envelope["conversation"],
            "type": self.envelope["type"],
            "to": self.envelope["recipient"],
            "state": self.state,
            "detail": self.detail,
            "receipt": self.receipt,
        } | ({"repeat_of": self.repeat_of} if self.repeat_of else {})


def signed(rt: Runtime, **attributes: Any) -> dict[str, Any]:
    envelope = build_envelope(source=rt.address, key_id=rt.key_id, **attributes)
    return sign_envelope(envelope, rt.key)


async def queue_and_try(rt: Runtime, envelope: dict[str, Any]) -> SendOutcome:
    """Queue ``envelope`` and flush. Raises the gateway's refusal when it refused this agent's
    integration token (revoked, unknown, expired): the envelope is taken out of the outbox
    again, since no retry can send it; only an unreachable gateway leaves it queued."""
    outbox.enqueue_send(rt.conn, envelope, utcnow())
    msg_id = envelope["id"]
    try:
        report = await flush(rt)
    except ConfigError as exc:
        # No usable credential: the message is safe in the outbox all the same.
        return SendOutcome(envelope, "queued", str(exc))
    if report.token_refused is not None and msg_id in report.deferred:
        outbox.delete(rt.conn, msg_id)
        raise report.token_refused
    if msg_id in report.sent:
        repeat_of = report.repeats.get(msg_id)
        row = receipts.find(rt.conn, repeat_of or msg_id)
        receipt = (
            None
            if row is None
            else {"id": row["rcp_id"], "seq": row["stream_seq"], "accepted_at": row["accepted_at"]}
        )
        return SendOutcome(envelope, "sent", receipt=receipt, repeat_of=repeat_of)
    if msg_id in report.failed:
        return SendOutcome(envelope, "failed", report.failed[msg_id])
    if report.unreachable is not None:
        return SendOutcome(envelope, "queued", report.unreachable)
    return SendOutcome(envelope, "queued", report.deferred.get(msg_id, "waiting for its lane"))


async def message_context(rt: Runtime, msg_id: str) -> dict[str, Any]:
    """from, to, conversation, trace id and replyto of a message we received or sent."""
    envelope: dict[str, Any] | None = None
    if (row := inbox.get(rt.conn, msg_id)) is not None:
        envelope = inbox.envelope_of(row)
    else:
        envelope = outbox.queued_envelope(rt.conn, msg_id)
    if envelope is not None:
        return {
            "from": envelope["source"],
            "to": envelope["recipient"],
            "conversation": envelope["conversation"],
            "trace_id": str(envelope["traceparent"]).split("-")[1],
            "replyto": envelope.get("replyto"),
        }
    try:
        meta = await rt.session.call(rt.client.get_message, msg_id, True)
    except GatewayError as exc:
        raise SidecarError(
            f"{msg_id} is not in the local store and the gateway says: {exc}"
        ) from exc
    except GatewayUnreachable as exc:
        raise GatewayUnreachable(exc.url, f"{msg_id} is not stored locally; {exc.reason}") from exc
    remote = meta.get("envelope") or {}
    return {
        "from": meta.get("from"),
        "to": meta.get("to"),
        "conversation": meta.get("conversation"),
        "trace_id": meta.get("trace_id"),
        "replyto": remote.get("replyto"),
    }


async def send_message(
    rt: Runtime,
    recipient: str,
    data: dict[str, Any],
    *,
    conversation: str | None = None,
    correlation: str | None = None,
    priority: str = "normal",
    expires: datetime | None = None,
    trace_id: str | None = None,
) -> SendOutcome:
    envelope = signed(
        rt,
        type=MESSAGE,
        recipient=recipient,
        data=data,
        conversation=conversation,
        correlation=correlation,
        priority=priority,
        expires=expires,
        traceparent=new_traceparent(trace_id),
    )
    return await queue_and_try(rt, envelope)


async def reply_message(rt: Runtime, msg_id: str, data: dict[str, Any]) -> SendOutcome:
    """Answer a message: to its ``replyto`` (default its sender), same conversation and trace."""
    ctx = await message_context(rt, msg_id)
    recipient = ctx["replyto"] or (ctx["from"] if ctx["from"] != rt.address else ctx["to"])
    return await send_message(
        rt,
        recipient,
        data,
        conversation=ctx["conversation"],
        correlation=msg_id,
        trace_id=ctx["trace_id"],
    )


async def ack_messages(rt: Runtime, msg_ids: list[str]) -> dict[str, bool]:
    """Application-ack messages; the reads are queued, then sent if the gateway is reachable."""
    now = utcnow()
    done = {msg_id: inbox.mark_read(rt.conn, msg_id, now) for msg_id in msg_ids}
    await flush(rt)
    return done
