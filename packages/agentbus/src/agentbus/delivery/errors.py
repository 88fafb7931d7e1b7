"""AB codes raised only by the delivery routes (00-CONVENTIONS.md §6)."""

from __future__ import annotations

from agentbus.errors import AgentBusError


class BatchTooLarge(AgentBusError):
    code, status, name = "AB-5009", 413, "batch_too_large"
    title = "Too many items in an ack, nak, term or read batch"
