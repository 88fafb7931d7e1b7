"""Extension points of the send path, for the task service.

``send_envelope`` calls a ``TaskRules`` for every ``agentbus.task.*`` envelope (the typed task
routes pass theirs; ``POST /v1/messages`` uses ``Gateway.task_rules`` and refuses task types
while none is installed):

- ``check`` runs at step 9 of 04-API-SPEC §4.1, in the read transaction, after recipient and
  conversation checks and before policy. It raises the AB-6xxx errors, or returns a
  ``SendResult`` to answer without storing anything (a duplicate task request, §6.1).
- ``apply`` runs in the write transaction right after the ``messages`` insert (05 §3 step 4):
  it writes ``tasks`` / ``task_transitions`` and returns the response's ``task`` member. It
  must re-check what it depends on under lock, since ``check`` ran in an earlier transaction.
- ``describe`` gives the ``task`` member of a replayed send.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from platformkit.db.scope import Conn

from agentbus.gateway.actions.addressing import Sender
from agentbus.gateway.api.principals import AgentPrincipal
from agentbus.gateway.domain.envelope import Parsed


@dataclass
class PendingSend:
    """A send that passed envelope validation, as the hooks see it."""

    principal: AgentPrincipal
    envelope: Parsed
    tenant: dict[str, Any]
    sender: Sender
    recipient: dict[str, Any] | None = None
    conversation: dict[str, Any] | None = None
    plaintext: bytes = b""
    payload_sha256: bytes = b""
    message: dict[str, Any] = field(default_factory=dict)
    inline: bytes | None = None  # the sealed payload its JetStream copy carries, if any
    accepted_at: datetime | None = None  # the validating transaction's time
    blobs: list[uuid.UUID] = field(default_factory=list)  # attached, locked until the commit
    attachment_bytes: int = 0  # their sizes together, for the policies

    @property
    def tenant_id(self) -> uuid.UUID:
        return self.principal.tenant_id


@dataclass
class SendResult:
    """What the route answers: ``status`` 202 (accepted) or 200 (replay), and the body."""

    status: int
    body: dict[str, Any]
    replayed: bool = False
    headers: dict[str, str] = field(default_factory=dict)


class TaskRules(Protocol):
    async def check(self, conn: Conn, send: PendingSend) -> SendResult | None: ...

    async def apply(self, conn: Conn, send: PendingSend) -> dict[str, Any] | None: ...

    async def describe(self, conn: Conn, message: dict[str, Any]) -> dict[str, Any] | None: ...
