"""Restoring the inbox after state.db was lost (05-DELIVERY-SEMANTICS.md §10.5).

Messages the gateway delivered to this agent before the loss are not delivered again: their
transport acks are recorded there. ``resync`` lists them (``GET /v1/messages?to=<self>&
status=delivered``: delivered, not yet read), reads each with its envelope and the key it was
signed with, checks it as a delivery is checked (``inbound.refusal_reason``: shape, recipient,
signature), and stores it as if just received (``inbox.restore``), so it is presented once.
What is already here, or expired, is left alone; what fails the checks is reported and not
stored (there is no delivery to refuse: the message stays ``delivered`` at the gateway).

It runs by itself once for a new state.db of an agent registered before (``runtime`` marks it;
the sync loop and the next sync of a command run it), and on ``agentbus inbox --resync``.
"""

from __future__ import annotations

from typing import Any

from agentbus_sidecar.clock import utcnow
from agentbus_sidecar.inbound import REFUSED, refusal_reason
from agentbus_sidecar.runtime import RESYNC_KEY, Runtime
from agentbus_sidecar.store import inbox
from agentbus_sidecar.store.meta import get_meta, set_meta

__all__ = ["request_resync", "resync", "resync_if_pending"]


async def resync(rt: Runtime) -> list[tuple[str, str]]:
    """``(msg_id, outcome)`` for every delivered, unread message the gateway lists: ``stored``,
    ``duplicate`` (already here), ``expired`` or ``refused``, oldest first."""
    outcomes: list[tuple[str, str]] = []
    delivered = {"to": rt.agent_id, "status": "delivered"}  # delivered to us, not yet read
    for item in reversed(await rt.session.items(rt.client.list_messages, delivered)):
        msg_id = str(item["id"])
        if inbox.get(rt.conn, msg_id) is not None:
            outcomes.append((msg_id, inbox.Outcome.DUPLICATE.value))
            continue
        read = await rt.session.call(rt.client.get_message, msg_id, True)
        raw: dict[str, Any] = {"msg_id": msg_id, "envelope": read.get("envelope"),
                               "sender_key": read.get("sender_key")}  # fmt: skip
        if refusal_reason(raw, rt.address) is not None:
            outcomes.append((msg_id, REFUSED))
            continue
        delivery = inbox.Delivery(
            msg_id=msg_id, stream_seq=int(read.get("stream_seq") or 0),
            attempt=int(read.get("attempts") or 1), ack_token="", envelope=raw["envelope"],
        )  # fmt: skip
        outcomes.append((msg_id, inbox.restore(rt.conn, delivery, utcnow()).value))
    return outcomes


def request_resync(rt: Runtime) -> None:
    """Ask the next sync to restore the inbox (``agentbus inbox --resync``)."""
    set_meta(rt.conn, RESYNC_KEY, "1")


async def resync_if_pending(rt: Runtime) -> list[tuple[str, str]]:
    """``resync`` if one is pending (asked for, or a new state.db); the mark is cleared only
    once it has run, so a resync the gateway could not answer is tried again by the next
    sync."""
    if get_meta(rt.conn, RESYNC_KEY) != "1":
        return []
    outcomes = await resync(rt)
    set_meta(rt.conn, RESYNC_KEY, "0")
    return outcomes
