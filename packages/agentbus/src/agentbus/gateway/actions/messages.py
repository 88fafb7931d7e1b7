"""Reading one message (04-API-SPEC §4.3): metadata for its sender and recipient and for the
tenant's operators, and with ``include=envelope`` the reconstructed, signed envelope with its
decrypted ``data`` and the key it was signed with (``sender_key``, as on a delivery). An
operator's read of a payload is an elevated action: it writes an ``audit_actions`` row
``message.view_payload`` in the transaction that found the message, and the payload is answered
only once that row has committed (a payload that then fails to load leaves the row: the attempt
is what is recorded)."""

from __future__ import annotations

import uuid
from typing import Any

from platformkit.db.scope import Conn, tenant_transaction

from agentbus.db import SCOPE
from agentbus.errors import NotFound
from agentbus.gateway.actions.audit import record_api_action
from agentbus.gateway.actions.payloads import load_payload
from agentbus.gateway.actions.publish import rebuild_envelope
from agentbus.gateway.api.auth import Reader
from agentbus.gateway.api.principals import AgentPrincipal
from agentbus.gateway.api.views import message_view, sender_key_view
from agentbus.gateway.context import Gateway
from agentbus.gateway.store import messages
from agentbus.ids import InvalidId, format_id, parse_id

VIEW_PAYLOAD = "message.view_payload"


def message_id_of(text: str) -> uuid.UUID:
    """A ``msg_`` id from a path; AB-8002 for anything else, as for a message not found."""
    try:
        return parse_id("msg", text)
    except InvalidId as exc:
        raise NotFound(f"no message {text}") from exc


async def find_visible_message(conn: Conn, reader: Reader, msg_id: uuid.UUID) -> dict[str, Any]:
    """The message if the reader may see it: an agent that sent or received it, or an
    operator's token of its tenant (and of its workspace, for a token bound to one). AB-8002
    otherwise, exactly as for a message that does not exist, so nobody learns of others'."""
    row = await messages.find_message(conn, reader.tenant_id, msg_id)
    if isinstance(reader, AgentPrincipal):
        visible = row is not None and reader.agent_id in (row["from_agent_id"], row["to_agent_id"])
    else:
        visible = row is not None and reader.workspace_id in (None, row["workspace_id"])
    if row is None or not visible:
        raise NotFound(f"no message {format_id('msg', msg_id)}")
    return row


async def read_message(
    gw: Gateway,
    reader: Reader,
    text: str,
    *,
    envelope: bool = False,
    client: tuple[str | None, str | None] = (None, None),
) -> dict[str, Any]:
    """``client``: the caller's address and user agent, for the audit row of an operator's
    payload read."""
    msg_id = message_id_of(text)
    async with tenant_transaction(gw.pool, SCOPE, reader.tenant_id) as conn:
        row = await find_visible_message(conn, reader, msg_id)
        if envelope and not isinstance(reader, AgentPrincipal):
            await record_api_action(
                conn, gw, reader, VIEW_PAYLOAD, target_type="message",
                target_id=format_id("msg", msg_id), client=client,
            )  # fmt: skip
        key = None
        if envelope:
            key = await gw.directory.key(conn, reader.tenant_id, row["signing_key_id"])
    body = message_view(row)
    if envelope:
        body["envelope"] = rebuild_envelope(row, await load_payload(gw, row))
        body["sender_key"] = sender_key_view(key)
    return body
