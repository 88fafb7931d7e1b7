"""Reading one message (04-API-SPEC §4.3): metadata for its sender and recipient, and with
``include=envelope`` the reconstructed, signed envelope with its decrypted ``data``."""

from __future__ import annotations

import uuid
from typing import Any

from platformkit.db.scope import Conn, tenant_transaction

from agentbus.db import SCOPE
from agentbus.errors import NotFound
from agentbus.gateway.context import Gateway
from agentbus.gateway.payloads import load_payload
from agentbus.gateway.principals import AgentPrincipal
from agentbus.gateway.publish import rebuild_envelope
from agentbus.gateway.store import messages
from agentbus.gateway.views import message_view
from agentbus.ids import InvalidId, format_id, parse_id


def message_id_of(text: str) -> uuid.UUID:
    """A ``msg_`` id from a path; AB-8002 for anything else, as for a message not found."""
    try:
        return parse_id("msg", text)
    except InvalidId as exc:
        raise NotFound(f"no message {text}") from exc


async def find_party_message(
    conn: Conn, principal: AgentPrincipal, msg_id: uuid.UUID
) -> dict[str, Any]:
    """The message if the caller sent or received it; AB-8002 otherwise, exactly as for a
    message that does not exist, so nobody learns of others' messages."""
    row = await messages.find_message(conn, principal.tenant_id, msg_id)
    if row is None or principal.agent_id not in (row["from_agent_id"], row["to_agent_id"]):
        raise NotFound(f"no message {format_id('msg', msg_id)}")
    return row


async def read_message(
    gw: Gateway, principal: AgentPrincipal, text: str, *, envelope: bool = False
) -> dict[str, Any]:
    msg_id = message_id_of(text)
    async with tenant_transaction(gw.pool, SCOPE, principal.tenant_id) as conn:
        row = await find_party_message(conn, principal, msg_id)
    body = message_view(row)
    if envelope:
        body["envelope"] = rebuild_envelope(row, await load_payload(gw, row))
    return body
