"""Where a message is (``agentbus trace``, the MCP ``trace`` tool): the local half from state.db
(a receipt of ours, a queued send, an inbox row), then the gateway's timeline. With the gateway
away or refusing, the local half alone, and why the rest is missing."""

from __future__ import annotations

from typing import Any

from agentbus_sidecar.errors import GatewayError, GatewayUnreachable
from agentbus_sidecar.runtime import Runtime
from agentbus_sidecar.store import inbox, outbox, receipts

__all__ = ["trace_message"]


async def trace_message(rt: Runtime, ident: str) -> dict[str, Any]:
    """``ident`` is a msg_ or rcp_ id."""
    local: dict[str, Any] = {}
    if (row := receipts.find(rt.conn, ident)) is not None:
        local = {
            "receipt": row["rcp_id"],
            "msg_id": row["msg_id"],
            "stream_seq": row["stream_seq"],
            "to": row["to_address"],
            "events": receipts.events_of(row),
        }
    elif (row := outbox.get(rt.conn, ident)) is not None:
        failed = row["next_attempt_at"] == outbox.PARKED
        events = [{"event": "queued", "at": row["created_at"]}]
        if row["last_error"]:
            events.append(
                {
                    "event": "failed" if failed else "retrying",
                    "at": "-",
                    "detail": row["last_error"],
                }
            )
        local = {
            "msg_id": ident,
            "outbox": True,
            "attempts": row["attempts"],
            "events": events,
        }
    elif (row := inbox.get(rt.conn, ident)) is not None:
        local = {
            "msg_id": ident,
            "from": row["from_address"],
            "events": [
                {"event": name, "at": row[column]}
                for name, column in (
                    ("received", "received_at"),
                    ("presented", "presented_at"),
                    ("read", "read_at"),
                )
                if row[column]
            ],
        }
    msg_id = local.get("msg_id", ident)
    try:
        if msg_id.startswith("rcp_"):
            found = await rt.session.call(rt.client.get_receipt, msg_id)
            msg_id = str((found.get("receipt") or found).get("msg_id"))
        remote = await rt.session.call(rt.client.message_trace, msg_id)
        offline = None
    except GatewayUnreachable as exc:
        if not local:
            raise
        remote, offline = {}, str(exc)
    except GatewayError as exc:
        if not local:
            raise
        remote, offline = {}, str(exc)
    return {"id": ident, "local": local, "remote": remote, "offline": offline}
