"""Task state changes, run inside a transaction the caller holds in the tenant's scope.

- ``apply_message``: a lifecycle message (accept ... cancel) from the send path (05 §3 step 4):
  party, conversation and correlation checks, the state machine (``tasks.domain``), the
  transition row; with ``dry_run`` only the checks (the send path's read transaction).

Delivery calls ``system_event`` when a request is transport-acked, expires or is dead-lettered;
the ``tasks.expire`` loop calls it for passed deadlines; ``charge`` records the spend of usage
uploads. Every change locks the task row first.

Budgets (docs/decisions/0031): once ``tasks.spent`` passes ``tasks.budget.max`` while the task is
open, the task is stopped: ``budget_exceeded`` moves it to ``cancelled`` with ``error_code``
AB-6012 and a transition whose reason starts ``budget_exceeded``, so the recipient's next verb
is refused AB-6003 and the trace shows ``task.budget_exceeded``.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from platformkit.db.scope import Conn
from psycopg.types.json import Jsonb

from agentbus.gateway.domain.errors import AttributeInvalid
from agentbus.gateway.domain.wire import format_ts
from agentbus.ids import format_id
from agentbus.tasks import store
from agentbus.tasks.domain import (
    ERROR_CODE,
    OPEN,
    TIMESTAMP_OF,
    TYPE_EVENTS,
    Decision,
    Event,
    Party,
    State,
    decide,
)
from agentbus.tasks.errors import REFUSALS, NotTaskParty, TaskNotFound
from agentbus.tasks.rules import over_budget, reported_cost

Row = dict[str, Any]


def party_of(task: Row, agent_id: uuid.UUID, event: Event) -> Party | None:
    roles = {
        Party.REQUESTER: task["requester_agent_id"] == agent_id,
        Party.RECIPIENT: task["recipient_agent_id"] == agent_id,
    }
    if not any(roles.values()):
        return None
    wanted = {Event.CANCEL: Party.REQUESTER}.get(event, Party.RECIPIENT)
    return wanted if roles[wanted] else next(p for p, is_it in roles.items() if is_it)


async def apply_message(
    conn: Conn,
    tenant_id: uuid.UUID,
    *,
    msg_id: uuid.UUID,
    msg_type: str,
    task_id: uuid.UUID,
    sender: uuid.UUID,
    recipient: uuid.UUID,
    conversation_id: uuid.UUID,
    correlation_id: uuid.UUID | None,
    data: dict[str, Any],
    dry_run: bool = False,
) -> Row:
    """A lifecycle message (accept ... cancel) applied to its task; the updated task row.
    ``dry_run`` only checks (the send path's read transaction), raising what applying would."""
    event = TYPE_EVENTS[msg_type]
    task = await store.get_task(conn, tenant_id, task_id, lock=not dry_run)
    party = None if task is None else party_of(task, sender, event)
    if task is None or party is None:
        raise TaskNotFound(f"no task {format_id('tsk', task_id)}")
    other = task["recipient_agent_id" if party is Party.REQUESTER else "requester_agent_id"]
    if recipient != other or conversation_id != task["conversation_id"]:
        raise NotTaskParty("task messages go to the other party, in the task's conversation")
    if correlation_id != task["request_msg_id"]:
        raise AttributeInvalid(
            "correlation must be the task request's id",
            errors=[{"pointer": "/correlation", "reason": "not the request id"}],
        )
    if dry_run:
        _refuse(task, decide(State(task["state"]), event, party), event)
        return task
    reason = data.get("reason") if event is Event.CANCEL else data.get("code")
    return await _apply(conn, tenant_id, task, event, party, by_msg_id=msg_id, data=data,
                        reason=reason if isinstance(reason, str) else None)  # fmt: skip


async def system_event(
    conn: Conn,
    tenant_id: uuid.UUID,
    task_id: uuid.UUID,
    event: Event,
    *,
    by_msg_id: uuid.UUID | None = None,
    reason: str | None = None,
    only_from: frozenset[State] = OPEN,
) -> Row | None:
    """Delivery and expiry facts; a no-op for a missing task or one outside ``only_from``."""
    task = await store.get_task(conn, tenant_id, task_id, lock=True)
    if task is None or State(task["state"]) not in only_from:
        return task
    return await _apply(conn, tenant_id, task, event, Party.SYSTEM, by_msg_id=by_msg_id,
                        data={}, reason=reason)  # fmt: skip


async def charge(
    conn: Conn, tenant_id: uuid.UUID, task_id: uuid.UUID, total: Decimal
) -> Row | None:
    """``total`` (the task's whole reported spend) as ``tasks.spent`` when larger, then the
    budget rule; the task row, None for a missing task."""
    task = await store.get_task(conn, tenant_id, task_id, lock=True)
    if task is None or total <= task["spent"]:
        return task
    updated = await store.update_task(conn, tenant_id, task_id, task["state"], spent=total)
    assert updated is not None  # the row is locked
    return await _enforce_budget(conn, tenant_id, updated, by_msg_id=None)


async def _enforce_budget(
    conn: Conn, tenant_id: uuid.UUID, task: Row, *, by_msg_id: uuid.UUID | None
) -> Row:
    if State(task["state"]) not in OPEN or not over_budget(task["budget"], task["spent"]):
        return task
    reason = f"budget_exceeded: spent {task['spent']} of {task['budget']['max']} USD"
    return await _apply(conn, tenant_id, task, Event.BUDGET_EXCEEDED, Party.SYSTEM,
                        by_msg_id=by_msg_id, data={}, reason=reason)  # fmt: skip


async def _apply(
    conn: Conn,
    tenant_id: uuid.UUID,
    task: Row,
    event: Event,
    party: Party,
    *,
    by_msg_id: uuid.UUID | None,
    data: dict[str, Any],
    reason: str | None,
) -> Row:
    current = State(task["state"])
    decision = decide(current, event, party)
    _refuse(task, decision, event)
    if decision.to is None:
        return task
    now = datetime.now(UTC)
    values: dict[str, Any] = {}
    if decision.to is not current:
        values["state"] = decision.to.value
        values[TIMESTAMP_OF[decision.to]] = now
        if decision.to is State.ACCEPTED and task["delivered_at"] is None:
            values["delivered_at"] = now
    values.update(_event_values(task, event, data, by_msg_id, now))
    updated = await store.update_task(conn, tenant_id, task["id"], current.value, **values)
    assert updated is not None  # the row is locked: nobody moved it meanwhile
    if decision.record:
        await store.insert_transition(
            conn, tenant_id, task["id"], current.value, decision.to.value,
            by_msg_id=by_msg_id, reason=reason, at=now,
        )  # fmt: skip
    if "spent" in values:
        return await _enforce_budget(conn, tenant_id, updated, by_msg_id=by_msg_id)
    return updated


def _refuse(task: Row, decision: Decision, event: Event) -> None:
    if decision.refusal is not None:
        raise REFUSALS[decision.refusal](
            f"{event.value} is not allowed on a task in state {task['state']}",
            task_id=format_id("tsk", task["id"]),
            state=task["state"],
        )


def _event_values(
    task: Row, event: Event, data: dict[str, Any], by_msg_id: uuid.UUID | None, now: datetime
) -> dict[str, Any]:
    values: dict[str, Any] = {}
    if event is Event.PROGRESS:
        summary = {k: data.get(k) for k in ("percent", "stage", "message")}
        values["progress"] = Jsonb(summary | {"at": format_ts(now)})
    elif event is Event.COMPLETE:
        values["result_msg_id"] = by_msg_id
    elif event in (Event.REJECT, Event.FAIL):
        values["error_code"] = data.get("code")
    elif event in ERROR_CODE:
        values["error_code"] = ERROR_CODE[event]
    cost = reported_cost(data)
    if cost is not None and cost > task["spent"]:
        values["spent"] = cost  # cumulative reports: keep the largest (conventions §4)
    return values
