"""Reading one message (04-API-SPEC §4.3): metadata for its sender and recipient, and with
``include=envelope`` the reconstructed, signed envelope with its decrypted ``data``."""

from __future__ import annotations

from typing import Any

from platformkit.db.scope import tenant_transaction

from agentbus.db import SCOPE
from agentbus.errors import NotFound
from agentbus.gateway.context import Gateway
from agentbus.gateway.payloads import load_payload
from agentbus.gateway.principals import AgentPrincipal
from agentbus.gateway.publish import rebuild_envelope
from agentbus.gateway.store import messages
from agentbus.gateway.views import message_view
from agentbus.ids import InvalidId, parse_id


async def read_message(
    gw: Gateway, principal: AgentPrincipal, text: str, *, envelope: bool = False
) -> dict[str, Any]:
    try:
        msg_id = parse_id("msg", text)
    except InvalidId as exc:
        raise NotFound(f"no message {text}") from exc
    async with tenant_transaction(gw.pool, SCOPE, principal.tenant_id) as conn:
        row = await messages.find_message(conn, principal.tenant_id, msg_id)
    if row is None or principal.agent_id not in (row["from_agent_id"], row["to_agent_id"]):
        raise NotFound(f"no message {text}")
    body = message_view(row)
    if envelope:
        body["envelope"] = rebuild_envelope(row, await load_payload(gw, row))
    return body
