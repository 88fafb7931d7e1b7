"""The audit job: signed checkpoints at a fixed interval and the ``sys.audit.>`` events.

Find: ``audit_heads_pending()`` lists the tenant chains with rows past their last checkpoint or
past what was published. Act, per tenant in its own transaction:

- checkpoint: when ``checkpoint_rows`` rows have come since the last checkpoint, or
  ``checkpoint_interval_s`` has passed since it (or there was none yet), a checkpoint row signed
  by the gateway's current signing key is appended (``actions.audit_chain.checkpoint_in``);
- publish: the rows after ``published_seq`` go out in seq order on
  ``sys.audit.<tenant hex>.<action>`` (``checkpoint`` for checkpoint rows) in stream
  ``SYS_AUDIT``, with ``Nats-Msg-Id`` ``audit:<tenant hex>:<seq>`` so a repeat after a crash is
  a duplicate, not a second event; ``published_seq`` moves to the last one NATS confirmed.

Both are safe to repeat; a tenant that fails is logged and tried again at the next run.
"""

from __future__ import annotations

import logging
import re
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from platformkit.db.scope import Pool, tenant_transaction, transaction
from platformkit.jobs import LeaderLoop, LockKey, shard_keys
from wirekit import canonical_json

from agentbus.actions.audit_chain import Signer, checkpoint_in, row_view
from agentbus.broker import Broker
from agentbus.db import SCOPE
from agentbus.store import audit_chain

log = logging.getLogger(__name__)

LOOP_NAME = "agentbus.audit"
PUBLISH_BATCH = 500
_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]")


def event_subject(tenant_id: uuid.UUID, row: dict[str, Any]) -> str:
    kind = "checkpoint" if row["event_kind"] == "checkpoint" else row["summary"].split(" ")[0]
    return f"sys.audit.{tenant_id.hex}.{_UNSAFE.sub('_', kind).strip('.') or 'event'}"


@dataclass
class AuditJob:
    pool: Pool
    broker: Broker
    signer: Signer
    checkpoint_interval_s: float = 3600.0
    checkpoint_rows: int = 1000

    def due(self, head: dict[str, Any], now: datetime) -> bool:
        new = int(head["seq"]) - int(head["checkpoint_seq"])
        if new <= 0:
            return False
        last = head["checkpoint_at"]
        return (
            new >= self.checkpoint_rows
            or last is None
            or (now - last).total_seconds() >= self.checkpoint_interval_s
        )

    async def checkpoint(self, tenant_id: uuid.UUID) -> int:
        async with tenant_transaction(self.pool, SCOPE, tenant_id) as conn:
            row = await checkpoint_in(conn, tenant_id, self.signer)
        return int(row["seq"])

    async def publish(self, tenant_id: uuid.UUID, after: int) -> int:
        """Rows after ``after`` out on NATS, in order; how many were confirmed."""
        if not self.broker.connected:
            return 0
        await self.broker.ensure_audit_stream()
        async with tenant_transaction(self.pool, SCOPE, tenant_id) as conn:
            rows: list[dict[str, Any]] = []
            async for batch in audit_chain.iter_rows(
                conn, tenant_id, from_seq=after + 1, batch=PUBLISH_BATCH
            ):
                rows = batch
                break
        confirmed = after
        for row in rows:
            ack = await self.broker.publish(
                event_subject(tenant_id, row), canonical_json(row_view(row)),
                msg_id=f"audit:{tenant_id.hex}:{row['seq']}",
            )  # fmt: skip
            if ack is None:
                break
            confirmed = int(row["seq"])
        if confirmed > after:
            async with tenant_transaction(self.pool, SCOPE, tenant_id) as conn:
                await audit_chain.mark_published(conn, tenant_id, confirmed)
        return confirmed - after

    async def run_once(self) -> int:
        """Checkpoints due, then publishing; how many events went out."""
        async with transaction(self.pool) as conn:
            heads = await audit_chain.pending_heads(conn)
        now, sent = datetime.now(UTC), 0
        for head in heads:
            tenant_id = head["tenant_id"]
            try:
                if self.due(head, now):
                    await self.checkpoint(tenant_id)
                sent += await self.publish(tenant_id, int(head["published_seq"]))
            except Exception:
                log.exception("audit job for tenant %s failed; trying again next run", tenant_id)
        return sent


def audit_loop(job: AuditJob, interval: float) -> LeaderLoop:
    async def body(_key: LockKey) -> None:
        await job.run_once()

    return LeaderLoop(job.pool, shard_keys(LOOP_NAME, 1), interval, body)
