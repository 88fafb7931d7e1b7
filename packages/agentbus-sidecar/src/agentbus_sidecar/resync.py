"""Restoring the inbox after state.db was lost (05-DELIVERY-SEMANTICS.md §10.5).

Messages the gateway delivered to this agent before the loss are not delivered again: their
transport acks are recorded there. ``resync`` lists them (``GET /v1/messages?to=<self>&
status=delivered``: delivered, not yet read), reads each with its envelope and the key it was
signed with, checks it as a delivery is checked (``inbound.refusal_reason``: shape, recipient,
signature), and stores it as if just received (``inbox.restore``), so it is presented once.
What is already here, or expired, is left alone; what fails the checks is reported and not
stored (there is no delivery to refuse: the message stays ``delivered`` at the gateway).
"""

from __future__ import annotations

from typing import Any

from agentbus_sidecar.clock import utcnow
from agentbus_sidecar.inbound import REFUSED, refusal_reason
from agentbus_sidecar.runtime import Runtime
from agentbus_sidecar.store import inbox

__all__ = ["resync"]

PAGE = 200


async def _delivered(rt: Runtime) -> list[dict[str, Any]]:
    """Every message the gateway has delivered to this agent and it has not read."""
    found: list[dict[str, Any]] = []
    params: dict[str, Any] = {"to": rt.agent_id, "status": "delivered", "limit": PAGE}
    while True:
        page = await rt.session.call(rt.client.list_messages, params)
        found += page.get("items", [])
        if not page.get("next_cursor"):
            return found
        params["cursor"] = page["next_cursor"]


async def resync(rt: Runtime) -> list[tuple[str, str]]:
    """``(msg_id, outcome)`` for every delivered, unread message the gateway lists: ``stored``,
    ``duplicate`` (already here), ``expired`` or ``refused``, oldest first."""
    outcomes: list[tuple[str, str]] = []
    for item in reversed(await _delivered(rt)):
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
