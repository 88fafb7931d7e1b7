"""``record_usage``: the write path of ``POST /v1/usage``. One transaction in the uploader's
tenant: each record checked alone (a refused record is answered with its problem, the others are
stored), its cost assessed against ``model_pricing``, the rows inserted idempotently by id, then
every task that got new rows charged their total (``tasks.actions.charge``: ``spent`` and the
budget rule)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from platformkit.db.scope import tenant_transaction
from psycopg.types.json import Jsonb

from agentbus.db import SCOPE
from agentbus.errors import AgentBusError
from agentbus.gateway.api.principals import AgentPrincipal
from agentbus.gateway.context import Gateway
from agentbus.tasks import actions as task_actions
from agentbus.tasks.errors import TaskNotFound
from agentbus.usage import store
from agentbus.usage.domain import Tokens, assess, model_key, price_on
from agentbus.usage.records import Checked, check_record

BATCH_MAX = 500


@dataclass
class Outcome:
    accepted: int = 0
    duplicates: int = 0
    refused: list[tuple[int, str | None, AgentBusError]] = field(default_factory=list)
    """(index in the batch, the record's id when it had one, the problem)"""


def _row(who: AgentPrincipal, rec: Checked, price_rows: dict[Any, Any]) -> dict[str, Any]:
    key = (rec.provider, model_key(rec.model))
    verdict = assess(
        Tokens(rec.input_tokens, rec.output_tokens, rec.cache_read_tokens, rec.cache_write_tokens),
        reported_by=rec.reported_by,
        claimed_confidence=rec.confidence,
        reported_cost=rec.cost,
        cost_source=rec.cost_source,
        price=price_on(price_rows.get(key, []), rec.at.date()),
    )
    return {
        "usage_id": rec.usage_id, "recorded_at": rec.at, "tenant_id": who.tenant_id,
        "workspace_id": who.workspace_id, "agent_id": who.agent_id, "task_id": rec.task,
        "message_id": rec.message, "conversation_id": rec.conversation, "harness": rec.harness,
        "provider": rec.provider, "model": rec.model, "input_tokens": rec.input_tokens,
        "output_tokens": rec.output_tokens, "cache_read_tokens": rec.cache_read_tokens,
        "cache_write_tokens": rec.cache_write_tokens, "reasoning_tokens": rec.reasoning_tokens,
        "cost_usd": verdict.cost_usd, "cost_source": verdict.cost_source,
        "reported_by": rec.reported_by, "confidence": verdict.confidence,
        "bus_bytes_in": rec.bus_bytes_in, "bus_bytes_out": rec.bus_bytes_out,
        "bus_messages": rec.bus_messages, "duration_ms": rec.duration_ms,
        "details": Jsonb(rec.details or {}),
    }  # fmt: skip


async def record_usage(gw: Gateway, who: AgentPrincipal, items: list[Any]) -> Outcome:
    outcome, now = Outcome(), datetime.now(UTC)
    checked: list[tuple[int, Checked]] = []
    for index, item in enumerate(items):
        try:
            checked.append((index, check_record(item, now)))
        except AgentBusError as exc:
            ident = item.get("id") if isinstance(item, dict) else None
            outcome.refused.append((index, ident if isinstance(ident, str) else None, exc))
    async with tenant_transaction(gw.pool, SCOPE, who.tenant_id) as conn:
        tasks = [r.task for _, r in checked if r.task is not None]
        parties = await store.task_parties(conn, who.tenant_id, tasks)
        kept: dict[uuid.UUID, Checked] = {}
        for index, rec in checked:
            if rec.task is not None and who.agent_id not in parties.get(rec.task, ()):
                refusal = TaskNotFound(f"no task {rec.task_id} this agent is a party to")
                outcome.refused.append((index, rec.id, refusal))
                continue
            if rec.usage_id in kept:
                outcome.duplicates += 1
                continue
            kept[rec.usage_id] = rec
        keys = {(r.provider, model_key(r.model)) for r in kept.values()}
        price_rows = await store.prices(conn, keys)
        rows = [_row(who, rec, price_rows) for rec in kept.values()]
        new = await store.insert_usage(conn, rows)
        outcome.accepted = len(new)
        outcome.duplicates += len(kept) - len(new)
        charged = {task for i in new if (task := kept[i].task) is not None}
        for task_id in sorted(charged):  # one order for every uploader: no lock cycles
            total = await store.task_total(conn, who.tenant_id, task_id)
            await task_actions.charge(conn, who.tenant_id, task_id, total)
    return outcome
