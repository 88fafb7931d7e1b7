"""Folding events into task rows: any order, any split, any repetition gives the same task."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from z4j.domain.taskstate import UNKNOWN_ATTEMPT, TaskState, winner
from z4j.ingest.fold import fold_batch, scoped_id, scoped_id_text

PROJECT = uuid.UUID(int=1)
T0 = datetime(2026, 1, 1, tzinfo=UTC)
KINDS = [
    "task.sent",
    "task.received",
    "task.started",
    "task.succeeded",
    "task.failed",
    "task.retried",
    "task.revoked",
]


def ev(i: int, kind: str, sec: int) -> dict[str, Any]:
    return {
        "id": f"e{i}",
        "kind": kind,
        "task_id": "t",
        "engine": "celery",
        "occurred_at": (T0 + timedelta(seconds=sec)).isoformat(),
        "data": {"task_name": "x", "exception": "ValueError: boom"},
    }


events_st = st.lists(
    st.tuples(st.sampled_from(KINDS), st.integers(0, 5)), min_size=1, max_size=12
).map(lambda xs: [ev(i, k, s) for i, (k, s) in enumerate(xs)])


def outcome(events: list[dict[str, Any]]) -> tuple[Any, ...]:
    row = next(iter(fold_batch(PROJECT, events).tasks.values()))
    return (
        row.claim,
        row.enqueued_at,
        row.started_at,
        row.finished_at,
        (row.error or {}).get("exc_type"),
    )


@given(events_st, st.randoms())
@settings(max_examples=200)
def test_order_does_not_matter(events: list[dict[str, Any]], rnd: Any) -> None:
    shuffled = events[:]
    rnd.shuffle(shuffled)
    assert outcome(events) == outcome(shuffled)


@given(events_st)
def test_duplicates_do_not_matter(events: list[dict[str, Any]]) -> None:
    assert outcome(events) == outcome(events + events)


def test_late_sent_never_moves_back_to_pending() -> None:
    claim = winner((TaskState.SUCCEEDED, T0, 0), (TaskState.PENDING, T0 + timedelta(hours=1), 3))
    assert claim[0] is TaskState.SUCCEEDED


def test_celery_retry_reuses_id_and_follows_agent_clock() -> None:
    seq = [
        ev(0, "task.sent", 0),
        ev(1, "task.started", 1),
        ev(2, "task.retried", 2),
        ev(3, "task.started", 3),
        ev(4, "task.succeeded", 4),
    ]
    assert outcome(seq)[0] == (TaskState.SUCCEEDED, T0 + timedelta(seconds=4), UNKNOWN_ATTEMPT)
    assert outcome(seq[:3])[0] == (TaskState.RETRIED, T0 + timedelta(seconds=2), UNKNOWN_ATTEMPT)


def test_malformed_events_are_rejected_not_fatal() -> None:
    folded = fold_batch(
        PROJECT, [{"kind": "task.sent"}, "nope", ev(1, "task.sent", 0), {**ev(2, "task.bogus", 0)}]
    )
    assert (folded.accepted, folded.rejected) == (1, 3)


def test_failure_keeps_error_and_traceback() -> None:
    e = ev(1, "task.failed", 1)
    e["data"]["traceback"] = "Traceback...\nValueError: boom"
    row = next(iter(fold_batch(PROJECT, [e]).tasks.values()))
    assert row.error == {
        "exc_type": "ValueError",
        "exc_msg": "boom",
        "traceback_redacted": "Traceback...\nValueError: boom",
    }


def test_a_later_attempt_beats_a_retry_stamped_after_it() -> None:
    # Celery republishes before it reports the retry: attempt 1 can finish before attempt 0's
    # "retried" is stamped.
    def at(i: int, kind: str, sec: int, attempt: int) -> dict[str, Any]:
        e = ev(i, kind, sec)
        e["data"]["retry_count"] = attempt
        return e

    seq = [
        at(0, "task.started", 0, 0),
        at(1, "task.started", 1, 1),
        at(2, "task.succeeded", 2, 1),
        at(3, "task.retried", 3, 0),
    ]
    assert outcome(seq)[0] == (TaskState.SUCCEEDED, T0 + timedelta(seconds=2), 1)


def test_a_terminal_event_without_a_retry_count_is_not_hidden_by_a_retry() -> None:
    retry = ev(1, "task.retried", 1)
    retry["data"]["retry_count"] = 1
    assert outcome([retry, ev(2, "task.failed", 2)])[0][0] is TaskState.FAILED


@given(st.uuids(), st.text(max_size=60))
def test_scoped_ids_are_uuid5_of_the_project(project: uuid.UUID, value: str) -> None:
    assert scoped_id_text(project, value) == str(uuid.uuid5(project, value))
    assert scoped_id(project, value) == uuid.uuid5(project, value)


def test_events_of_one_task_share_its_row_and_id() -> None:
    folded = fold_batch(PROJECT, [ev(0, "task.sent", 0), ev(1, "task.started", 1)])
    (row,) = folded.tasks.values()
    assert row.id == str(uuid.uuid5(PROJECT, "t"))
    assert [e.task_id for e in folded.events] == [row.id, row.id]
    assert [e.id for e in folded.events] == [str(uuid.uuid5(PROJECT, f"e{i}")) for i in (0, 1)]


def test_the_z4j_celery_agents_shape_is_read() -> None:
    """z4j-celery sends the type and the message apart (the event stream's message is the
    exception's repr), no task.sent and no retry count, and a revoke from two sources."""

    def real(i: str, kind: str, sec: int, **data: Any) -> dict[str, Any]:
        return ev(0, kind, sec) | {"id": i, "data": {"task_name": "x", **data}}

    folded = fold_batch(
        PROJECT,
        [
            real("a", "task.received", 1),
            real("b", "task.started", 2),
            real("c", "task.retried", 3, reason="ConnectionError('x')"),
            real(
                "d",
                "task.failed",
                4,
                exception="ValueError",
                exception_message="ValueError('gateway refused order o-7')",
            ),
            real("e", "task.revoked", 5, terminated=False),
            real("f", "task.revoked", 5, terminated=False),
        ],
    )
    row = folded.tasks["t"]
    assert row.enqueued_at == T0 + timedelta(seconds=1)
    assert row.error is None  # the revoke came last
    assert folded.count_retries == {row.id}
    cancelled = {e.id for e in folded.events if e.event_type == "cancelled"}
    assert len(cancelled) == 1

    failed = fold_batch(
        PROJECT,
        [
            real(
                "d",
                "task.failed",
                4,
                exception="ValueError",
                exception_message="ValueError('gateway refused')",
            )
        ],
    )
    assert failed.tasks["t"].error == {
        "exc_type": "ValueError",
        "exc_msg": "gateway refused",
        "traceback_redacted": None,
    }
