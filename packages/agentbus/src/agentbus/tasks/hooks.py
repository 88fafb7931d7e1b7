"""The task rules of the send path (``agentbus.gateway.actions.hooks.TaskRules``): what a task
envelope must satisfy before it is stored, and what storing it does to ``tasks``.

``install(gw)`` puts them on the gateway so ``POST /v1/messages`` accepts task types too; the
typed routes of ``tasks.api`` pass them explicitly.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from platformkit.db.scope import Conn

from agentbus.gateway.actions.hooks import PendingSend, SendResult
from agentbus.gateway.actions.receipts import find_kid, receipt_view
from agentbus.gateway.actions.replay import REPLAYED_HEADER
from agentbus.gateway.context import Gateway
from agentbus.gateway.store import receipts
from agentbus.ids import format_id
from agentbus.tasks import actions, requests, rules, store
from agentbus.tasks.domain import REQUEST_TYPE
from agentbus.tasks.render import task_view

Row = dict[str, Any]


def _summary(task: Row) -> dict[str, Any]:
    return {"id": format_id("tsk", task["id"]), "state": task["state"]}


class TaskService:
    """``TaskRules`` over ``tasks.requests`` and ``tasks.actions``."""

    def __init__(self, gateway: Gateway) -> None:
        self.gateway = gateway

    async def check(self, conn: Conn, send: PendingSend) -> SendResult | None:
        env, recipient = send.envelope, send.recipient
        assert recipient is not None
        if env.type != REQUEST_TYPE:
            await self._lifecycle(conn, send, dry_run=True)
            return None
        version = rules.check_capability(
            recipient["capabilities"], env.get("capability"), env.get("capabilityver")
        )
        rules.parse_deadline(
            env.data.get("deadline"), datetime.now(UTC), send.tenant["retention_days"]
        )
        rules.check_budget(env.data.get("budget"))
        duplicate = await requests.find_duplicate(
            conn, send.tenant_id, recipient=recipient["id"],
            idempotency_key=env.get("idempotencykey"), capability=env.get("capability"),
            capability_ver=version, payload_sha256=send.payload_sha256,
        )  # fmt: skip
        if duplicate is None:
            return None
        return await self._replay(conn, send, duplicate)

    async def _replay(
        self, conn: Conn, send: PendingSend, duplicate: requests.Duplicate
    ) -> SendResult:
        """04 §6.1: the existing task, the original request and its receipt; nothing stored."""
        task, original = duplicate.task, duplicate.request_msg_id
        names = await store.addresses(
            conn, send.tenant_id, [task["requester_agent_id"], task["recipient_agent_id"]]
        )
        last = await receipts.latest_receipt(conn, send.tenant_id, original)
        receipt = None if last is None else receipt_view(last, find_kid(self.gateway.signing, last))
        body = {
            "task": task_view(task, names),
            "duplicate_of": format_id("msg", original),
            "receipt": receipt,
        }
        headers = {REPLAYED_HEADER: "true", **send.envelope.trace_headers}
        return SendResult(200, body, replayed=True, headers=headers)

    async def apply(self, conn: Conn, send: PendingSend) -> dict[str, Any] | None:
        env, recipient, message = send.envelope, send.recipient, send.message
        assert recipient is not None
        if env.type != REQUEST_TYPE:
            return _summary(await self._lifecycle(conn, send, dry_run=False))
        now = datetime.now(UTC)
        try:
            task = await requests.create_task(
                conn, send.tenant_id, msg_id=env.msg_id, workspace_id=message["workspace_id"],
                conversation_id=env.conversation_id, requester=send.principal.agent_id,
                recipient=recipient["id"], idempotency_key=env.get("idempotencykey"),
                capability=env.get("capability"),
                capability_ver=env.get("capabilityver") or "1",
                payload_sha256=send.payload_sha256,
                budget=rules.check_budget(env.data.get("budget")),
                expires_at=rules.parse_deadline(
                    env.data.get("deadline"), now, send.tenant["retention_days"]
                ),
            )  # fmt: skip
        except requests.DuplicateTaskRequest as race:
            raise requests.concurrent_duplicate(race.duplicate) from None
        return _summary(task)

    async def _lifecycle(self, conn: Conn, send: PendingSend, *, dry_run: bool) -> Row:
        env, recipient = send.envelope, send.recipient
        assert recipient is not None
        assert env.subject_id is not None
        return await actions.apply_message(
            conn, send.tenant_id, msg_id=env.msg_id, msg_type=env.type, task_id=env.subject_id,
            sender=send.principal.agent_id, recipient=recipient["id"],
            conversation_id=env.conversation_id, correlation_id=env.correlation_id,
            data=env.data, dry_run=dry_run,
        )  # fmt: skip

    async def describe(self, conn: Conn, message: dict[str, Any]) -> dict[str, Any] | None:
        """The ``task`` member of a replayed task send: the task as it is now."""
        task_id = message["id"] if message["type"] == REQUEST_TYPE else message["correlation_id"]
        if task_id is None:
            return None
        task = await store.get_task(conn, message["tenant_id"], task_id)
        return None if task is None else _summary(task)


def install(gw: Gateway) -> TaskService:
    """Make ``POST /v1/messages`` accept task types with these rules."""
    service = TaskService(gw)
    gw.task_rules = service
    return service
