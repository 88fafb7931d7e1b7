"""Task requests and task changes on real PostgreSQL as the app role (RLS on), below the HTTP
layer: idempotency on (recipient, key) including the race the send path can lose, system
events limited to the states they apply to, repeated progress without a transition row."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from agentbus import db
from agentbus.tasks import actions, requests, store
from agentbus.tasks.domain import Event, State
from agentbus.tasks.errors import IdempotencyConflict, TransitionInvalid
from platformkit.db.scope import Pool, tenant_transaction
from platformkit.ids import uuid7


@pytest.fixture
async def seeded(agentbus_db: str) -> tuple[uuid.UUID, dict[str, Any]]:
    """A tenant whose agent ``agt`` has task ``tsk`` (key ``k1``, request ``msg``)."""
    from agentbus.testing import seed_tenant  # after pytest_plugins registered the module

    tenant, statements = await seed_tenant(agentbus_db, "tenant-a")
    return tenant, statements[0][2]


def request_args(p: dict[str, Any], **overrides: Any) -> dict[str, Any]:
    return {
        "msg_id": uuid7(), "workspace_id": p["ws"], "conversation_id": p["cnv"],
        "requester": p["agt"], "recipient": p["agt"], "idempotency_key": "k1",
        "capability": "code.review", "capability_ver": "1", "payload_sha256": p["h"],
    } | overrides  # fmt: skip


async def test_a_second_request_under_the_same_key(
    agentbus_app_pool: Pool, seeded: tuple[uuid.UUID, dict[str, Any]]
) -> None:
    tenant, p = seeded
    async with tenant_transaction(agentbus_app_pool, db.SCOPE, tenant) as conn:
        found = await requests.find_duplicate(
            conn, tenant, recipient=p["agt"], idempotency_key="k1", capability="code.review",
            capability_ver="1", payload_sha256=p["h"],
        )  # fmt: skip
        assert found is not None
        assert (found.task["id"], found.request_msg_id) == (p["tsk"], p["msg"])
        with pytest.raises(IdempotencyConflict) as conflict:
            await requests.find_duplicate(
                conn, tenant, recipient=p["agt"], idempotency_key="k1",
                capability="code.review", capability_ver="2", payload_sha256=p["h"],
            )  # fmt: skip
        assert conflict.value.data["task_id"] == "tsk_" + p["tsk"].hex
    # The race: both passed their checks, the other committed first.
    with pytest.raises(requests.DuplicateTaskRequest) as raced:
        async with tenant_transaction(agentbus_app_pool, db.SCOPE, tenant) as conn:
            await requests.create_task(conn, tenant, **request_args(p))
    assert raced.value.duplicate.task["id"] == p["tsk"]
    with pytest.raises(IdempotencyConflict):
        async with tenant_transaction(agentbus_app_pool, db.SCOPE, tenant) as conn:
            await requests.create_task(conn, tenant, **request_args(p, payload_sha256=b"x" * 32))


async def test_create_then_move_through_progress(
    agentbus_app_pool: Pool, seeded: tuple[uuid.UUID, dict[str, Any]]
) -> None:
    tenant, p = seeded
    args = request_args(p, idempotency_key="k2")
    msg_id = args["msg_id"]
    async with tenant_transaction(agentbus_app_pool, db.SCOPE, tenant) as conn:
        task = await requests.create_task(conn, tenant, **args)
        assert (task["id"], task["state"]) == (msg_id, "submitted")
        lifecycle = {
            "task_id": msg_id, "sender": p["agt"], "recipient": p["agt"],
            "conversation_id": p["cnv"], "correlation_id": msg_id,
        }  # fmt: skip
        for kind, data in (
            ("accept", {}),
            ("progress", {"percent": 10}),
            ("progress", {"percent": 20, "usage": {"cost_usd": "0.5"}}),
            ("progress", {"percent": 30, "usage": {"cost_usd": "0.2"}}),
        ):
            task = await actions.apply_message(
                conn, tenant, msg_id=uuid7(), msg_type=f"agentbus.task.{kind}.v1", data=data,
                **lifecycle,
            )  # fmt: skip
        assert task["state"] == "in_progress"
        assert task["progress"]["percent"] == 30
        assert str(task["spent"]) == "0.500000"  # cumulative reports: the largest one wins
        with pytest.raises(TransitionInvalid):
            await actions.apply_message(
                conn, tenant, msg_id=uuid7(), msg_type="agentbus.task.accept.v1", data={},
                **lifecycle,
            )  # fmt: skip
        trail = await store.list_transitions(conn, tenant, msg_id)
    assert [(t["from_state"], t["to_state"]) for t in trail] == [
        (None, "submitted"),
        ("submitted", "accepted"),
        ("accepted", "in_progress"),
    ]


async def test_system_events_apply_only_where_they_should(
    agentbus_app_pool: Pool, seeded: tuple[uuid.UUID, dict[str, Any]]
) -> None:
    tenant, p = seeded
    async with tenant_transaction(agentbus_app_pool, db.SCOPE, tenant) as conn:
        unanswered = frozenset({State.SUBMITTED, State.DELIVERED})
        task = await actions.system_event(conn, tenant, p["tsk"], Event.DELIVERED)
        assert task is not None
        assert task["state"] == "delivered"
        again = await actions.system_event(conn, tenant, p["tsk"], Event.DELIVERED)
        assert again is not None
        assert again["delivered_at"] == task["delivered_at"]
        failed = await actions.system_event(conn, tenant, p["tsk"], Event.DEAD_LETTER)
        assert failed is not None
        assert (failed["state"], failed["error_code"]) == ("failed", "AB-6011")
        # A late expiry of the request leaves a finished task alone.
        late = await actions.system_event(
            conn, tenant, p["tsk"], Event.EXPIRE, only_from=unanswered
        )
        assert late is not None
        assert late["state"] == "failed"
        assert await actions.system_event(conn, tenant, uuid7(), Event.EXPIRE) is None
        trail = await store.list_transitions(conn, tenant, p["tsk"])
    assert [t["to_state"] for t in trail] == ["submitted", "delivered", "failed"]
