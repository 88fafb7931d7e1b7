"""Status notifications (``agentbus.delivery.status.v1``, conventions §4): best-effort frames
pushed to the sender's delivery WebSocket when its message is delivered, read, expired or
dead-lettered. Outcomes collect them inside their transaction; callers publish them after the
commit on a core NATS subject per sender (outside every tenant stream), which the sender's
WebSocket, on whichever instance it is open, forwards as ``status`` frames. Authoritative state
is always ``GET /v1/messages/{id}``."""

from __future__ import annotations

import contextlib
import json
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from agentbus.broker import Broker
from agentbus.gateway.domain.wire import format_ts
from agentbus.gateway.metrics import MESSAGE_STATUS
from agentbus.ids import format_id


def status_subject(tenant_id: uuid.UUID, agent_id: uuid.UUID) -> str:
    return f"agentbus.delivery.status.{tenant_id.hex}.{agent_id.hex}"


@dataclass(frozen=True)
class Notice:
    tenant_id: uuid.UUID
    sender_id: uuid.UUID
    msg_id: uuid.UUID
    status: str
    attempt: int | None
    error_code: str | None = None

    def frame(self) -> dict[str, Any]:
        return {
            "type": "status",
            "msg_id": format_id("msg", self.msg_id),
            "status": self.status,
            "at": format_ts(datetime.now(UTC)),
            "attempt": self.attempt,
            "error_code": self.error_code,
        }


Notes = list[Notice]


def note(notes: Notes | None, row: dict[str, Any], status: str) -> None:
    if notes is not None and row.get("from_agent_id") is not None:
        attempt = row.get("attempt") or row.get("attempts")
        notes.append(Notice(row["tenant_id"], row["from_agent_id"], row["id"], status, attempt))


async def publish(broker: Broker, notes: Notes) -> None:
    """After the commit; a lost notice costs nothing but a later ``GET``. Each is counted in
    ``agentbus_message_status_total``, published or not."""
    for notice in notes:
        MESSAGE_STATUS.labels(notice.status).inc()
    if not notes or not broker.connected:
        return
    nc = getattr(broker, "nc", None) or getattr(broker, "_nc", None)
    if nc is None:
        return
    for notice in notes:
        with contextlib.suppress(Exception):
            subject = status_subject(notice.tenant_id, notice.sender_id)
            await nc.publish(subject, json.dumps(notice.frame()).encode())
