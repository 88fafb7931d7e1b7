"""Redrive (04-API-SPEC §4.6, 05-DELIVERY-SEMANTICS §7.4): a dead-lettered message goes back
to ``accepted`` and out again as a new JetStream copy.

Its old copy used up its deliveries (or was terminated), so the consumer will not hand it out
again: a redrive publishes the same bytes under a new ``Nats-Msg-Id``, ``msg_<hex>:r<hex>``,
fresh for every redrive, so the stream's duplicate window never takes it for the old copy.

Order, in one transaction on the row's lock: the checks, the recipient's delivery state reset
(``attempt`` counts the new copy's deliveries, as MaxDeliver does), the ``message.redrive``
audit row, then the publish, then ``status = 'accepted'`` with the new ``stream_seq``, then the
commit. When NATS does not confirm, the transaction rolls back and the call fails with AB-9003:
nothing changed, and calling again is safe. A copy pulled in the moment between the publish and
the commit finds its row still ``dead_lettered`` with an older sequence; the pull naks it for a
second instead of dropping it (``domain.triage``, ``Triage.AHEAD``). A copy published by a
redrive whose commit then failed is delivered after a later redrive succeeds, as a duplicate
the sidecar's dedupe horizon absorbs.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from platformkit.db.scope import Conn, tenant_transaction
from platformkit.ids import uuid7

from agentbus.db import SCOPE
from agentbus.delivery import store
from agentbus.delivery.domain import Status, redrive_refusal
from agentbus.errors import InsufficientScope, NotFound, RoleRequired
from agentbus.gateway.actions.agent_access import check_token_over_agent
from agentbus.gateway.actions.audit import record_api_action
from agentbus.gateway.actions.messages import find_visible_message, message_id_of
from agentbus.gateway.actions.publish import publish_message
from agentbus.gateway.api.auth import Reader, require_scopes
from agentbus.gateway.api.principals import AgentPrincipal
from agentbus.gateway.api.views import message_view
from agentbus.gateway.context import Gateway
from agentbus.gateway.domain import errors as e
from agentbus.gateway.domain.schemas import TASK_REQUEST
from agentbus.gateway.store import agents
from agentbus.ids import format_id

REDRIVE = "message.redrive"


async def _check_may_redrive(conn: Conn, who: Reader, row: dict[str, Any]) -> None:
    """Its sender, with ``send``; or a token with ``admin`` of the sender's owner or of an
    admin of its workspace."""
    if isinstance(who, AgentPrincipal):
        if who.agent_id != row["from_agent_id"]:
            raise RoleRequired("only the message's sender or an admin token may redrive it")
        if "send" not in who.scopes:
            raise InsufficientScope("the credential lacks the 'send' scope", scope="send")
        return
    require_scopes(who, ("admin",), "a redrive")
    sender = await agents.get_agent(conn, who.tenant_id, row["from_agent_id"])
    assert sender is not None  # messages.from_agent_id references agents
    await check_token_over_agent(conn, who, sender)


async def redrive_message(
    gw: Gateway,
    who: Reader,
    text: str,
    *,
    client: tuple[str | None, str | None] = (None, None),
) -> dict[str, Any]:
    """The message, ``accepted`` again with its new sequence; AB-8009 when it may not be
    redriven. ``client``: the caller's address and user agent, for the audit row."""
    msg_id = message_id_of(text)
    async with tenant_transaction(gw.pool, SCOPE, who.tenant_id) as conn:
        found = await find_visible_message(conn, who, msg_id)
        await _check_may_redrive(conn, who, found)
        row = await store.lock_any(conn, who.tenant_id, msg_id, found["accepted_at"])
        if row is None:  # deleted by retention between the read and the lock
            raise NotFound(f"no message {text}")
        recipient = None
        if row["to_agent_id"] is not None:
            recipient = await agents.get_agent(conn, who.tenant_id, row["to_agent_id"])
        refusal = redrive_refusal(
            Status(row["status"]),
            row["expires_at"],
            datetime.now(UTC),
            None if recipient is None else recipient["status"],
            row["type"] == TASK_REQUEST,
        )
        if refusal is not None:
            raise e.NotRedrivable(refusal, status_now=row["status"])
        await store.record(conn, who.tenant_id, msg_id, row["to_agent_id"], "redrive")
        copy = uuid7()
        await record_api_action(
            conn, gw, who, REDRIVE, target_type="message", target_id=format_id("msg", msg_id),
            details={"dlq_reason": row["dlq_reason"], "copy": copy.hex}, client=client,
        )  # fmt: skip
        seq = await publish_message(
            gw, found, msg_id_header=f"{format_id('msg', msg_id)}:r{copy.hex}", record_seq=False
        )
        if seq is None:
            raise e.BrokerUnavailable("NATS did not confirm the new copy; nothing was changed")
        await store.redriven(conn, who.tenant_id, row, seq)
    return message_view({**found, "status": "accepted", "stream_seq": seq})
