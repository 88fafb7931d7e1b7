"""What the gateway decides about each pulled copy before handing it out (05 §4 step 3):

- ``triage``: row gone -> term; a redrive's copy ahead of its commit -> nak 1 s; terminal or
  already transport-acked -> ack and drop; past ``expires_at`` -> term and ``expired``; else
  deliver;
- ``recheck_policy``: the ``read`` policies with the current set: denied -> term and
  ``discarded`` (event code AB-4004, naming the policy); no decision possible -> nak 60 s;
- ``load_payloads``: decrypt and check the payload (carried inline in the copy, or from the
  object store): missing or digest mismatch -> term and dead-letter (``payload_integrity``);
  object store down -> nak 10 s, and pulls stop until it answers again (``breaker``); tenant
  key unavailable -> nak 60 s.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cached_property
from typing import Any

from nats.aio.msg import Msg
from platformkit.db.scope import Conn

from agentbus.delivery import store
from agentbus.delivery.domain import (
    PAYLOAD_INTEGRITY,
    REDRIVE_AHEAD_NAK_MS,
    CopyState,
    Status,
    Triage,
    triage,
)
from agentbus.delivery.service import DeliveryService
from agentbus.delivery.tokens import parse_ack_subject
from agentbus.gateway.actions.payloads import load_payload
from agentbus.gateway.actions.policy import PolicyError
from agentbus.gateway.actions.policy import count as count_decision
from agentbus.gateway.api.principals import AgentPrincipal
from agentbus.gateway.domain.errors import (
    KeyUnavailable,
    ObjectStoreUnavailable,
    PayloadIntegrityFailed,
)
from agentbus.gateway.domain.wire import b64url_decode
from agentbus.gateway.store.agents import get_agent
from agentbus.ids import InvalidId, parse_id
from agentbus.policies.domain import Request as PolicyRequest
from agentbus.policies.model import READ

Row = dict[str, Any]
NAK_AFTER_STORE_FAILURE_MS = 10_000
NAK_AFTER_DATABASE_FAILURE_MS = 10_000
NAK_AFTER_KEY_FAILURE_MS = 60_000
NAK_AFTER_POLICY_FAILURE_MS = 60_000


@dataclass
class Copy:
    """One pulled JetStream message and what the gateway decided about it."""

    msg: Msg
    msg_id: uuid.UUID | None
    attempt: int
    stream_seq: int
    pending: int
    row: Row | None = None
    verdict: Triage = Triage.GONE
    data: Any = None
    settle: str | None = None  # ack, term or nak for copies the gateway drops itself
    nak_ms: int = 0
    dlq_reason: str | None = None
    discard: bool = False
    denied_by: tuple[uuid.UUID | None] | None = None  # discarded by policy: the policy, if one

    def drop(self, settle: str, nak_ms: int = 0) -> None:
        self.verdict, self.settle, self.nak_ms = Triage.GONE, settle, nak_ms

    @cached_property
    def envelope(self) -> dict[str, Any]:
        """The copy's body: the signed envelope with ``data`` a reference (``publish``)."""
        body: dict[str, Any] = json.loads(self.msg.data)
        return body

    def inline(self) -> bytes | None:
        """The sealed payload the copy carries (``inline_payloads``), or None; a malformed one
        counts as none, and the store's copy is read."""
        data = self.envelope.get("data")
        sealed = data.get("$sealed") if isinstance(data, dict) else None
        try:
            return None if sealed is None else b64url_decode(sealed)
        except ValueError:
            return None


LOAD_CONCURRENCY = 16
_SETTLES = {Triage.GONE: "term", Triage.DUPLICATE: "ack", Triage.EXPIRED: "term",
            Triage.AHEAD: "nak"}  # fmt: skip


def parse_copy(msg: Msg) -> Copy:
    """InvalidAckToken when the message carries no JetStream ack subject."""
    subject = parse_ack_subject(msg.reply or "")
    header = (msg.headers or {}).get("Nats-Msg-Id", "")
    try:
        msg_id: uuid.UUID | None = parse_id("msg", header.split(":", 1)[0])
    except InvalidId:
        msg_id = None
    return Copy(msg, msg_id, subject.delivered, subject.stream_seq, subject.pending)


async def triage_all(
    conn: Conn, tenant_id: uuid.UUID, pulls: list[tuple[uuid.UUID, list[Copy]]]
) -> None:
    """Reads the rows of the copies pulled for each agent (locking nothing) on ``conn``, in
    the tenant's scope, in one statement; a copy's row is found only as a message to the agent
    it was pulled for."""
    to = {c.msg_id: agent for agent, copies in pulls for c in copies if c.msg_id is not None}
    rows = await store.load(conn, tenant_id, to)
    now = datetime.now(UTC)
    for copy in (c for _agent, copies in pulls for c in copies):
        copy.row = rows.get(copy.msg_id) if copy.msg_id is not None else None
        state = None
        if copy.row is not None:
            acked = copy.row["transport_acked_at"] is not None
            state = CopyState(
                Status(copy.row["status"]), acked, copy.row["expires_at"], copy.row["stream_seq"]
            )
        copy.verdict = triage(state, now, copy.stream_seq)
        copy.settle = _SETTLES.get(copy.verdict)
        if copy.verdict is Triage.AHEAD:
            copy.nak_ms = REDRIVE_AHEAD_NAK_MS


def _deliverable(copies: list[Copy]) -> list[tuple[Copy, Row]]:
    return [(c, c.row) for c in copies if c.verdict is Triage.DELIVER and c.row is not None]


async def recheck_policy(
    svc: DeliveryService,
    conn: Conn,
    who: AgentPrincipal,
    copies: list[Copy],
    recipient: Row | None,
) -> None:
    """The ``read`` action of the recipient's policies for each deliverable copy (principal:
    the recipient, resource: the sender), with the set in force now. ``recipient``: the
    agent's row, read by the caller in this transaction (None: gone)."""
    engine, found = svc.gateway.policy, _deliverable(copies)
    if not found:
        return
    try:
        compiled = None
        if recipient is not None:
            compiled = await engine.policy_set(conn, who.tenant_id, recipient["workspace_id"])
    except PolicyError:
        for copy, _row in found:
            copy.drop("nak", NAK_AFTER_POLICY_FAILURE_MS)
        return
    if compiled is not None and compiled.allows_all:
        count_decision(READ, True, len(found))
        return
    senders = {
        sid: await get_agent(conn, who.tenant_id, sid)
        for sid in {row["from_agent_id"] for _c, row in found}
    }
    now = datetime.now(UTC)
    for copy, row in found:
        sender = senders.get(row["from_agent_id"])
        if recipient is None or sender is None or compiled is None:
            copy.drop("term")
            copy.discard = True
            continue
        request = PolicyRequest(
            action=READ, principal=recipient, resource=sender, type=row["type"],
            capability=row["capability"], size_bytes=row["payload_bytes"], attachments=0,
            attachment_bytes=0, priority=row["priority"], at=now,
        )  # fmt: skip
        try:
            decision = engine.decide(compiled, request)
        except PolicyError:
            copy.drop("nak", NAK_AFTER_POLICY_FAILURE_MS)
            continue
        if not decision.allowed:
            copy.drop("term")
            copy.discard, copy.denied_by = True, (decision.policy_id,)


async def load_payloads(
    svc: DeliveryService, who: AgentPrincipal, copies: list[Copy]
) -> list[Copy]:
    """Every deliverable copy's payload, ``LOAD_CONCURRENCY`` object reads at a time; the
    copies it dropped instead."""
    limit = asyncio.Semaphore(LOAD_CONCURRENCY)
    failed: list[Copy] = []

    async def one(copy: Copy, row: Row) -> None:
        async with limit:
            try:
                copy.data = await load_payload(svc.gateway, row, copy.inline())
                return
            except PayloadIntegrityFailed:
                copy.drop("term")
                copy.dlq_reason = PAYLOAD_INTEGRITY
            except ObjectStoreUnavailable:
                copy.drop("nak", NAK_AFTER_STORE_FAILURE_MS)
                svc.store.failed(time.monotonic())
            except KeyUnavailable:
                copy.drop("nak", NAK_AFTER_KEY_FAILURE_MS)
            failed.append(copy)

    await asyncio.gather(*(one(copy, row) for copy, row in _deliverable(copies)))
    return failed
