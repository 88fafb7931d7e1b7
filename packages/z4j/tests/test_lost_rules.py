"""The rules of lost tasks: which states can be lost, what a lost claim wins over, what wins
over it, when silence makes a task lost, which states are retriable; and when the dashboard
says that a task's start is not reported."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st
from z4j.domain.lost import lost_reason
from z4j.domain.notices import agent_sends_no_starts, unreported_start
from z4j.domain.taskstate import (
    TERMINAL,
    Claim,
    TaskState,
    is_retriable,
    lost_claim,
    retriable_states,
    winner,
)
from z4j.store.tasks_read import TASK_STATES

BASE = datetime(2026, 12, 1, tzinfo=UTC)
states = st.sampled_from(list(TaskState))
moments = st.integers(0, 10_000).map(lambda s: BASE + timedelta(milliseconds=s))
attempts = st.integers(0, 5)
claims = st.tuples(states, moments, attempts)
real_states = st.sampled_from([s for s in TaskState if s is not TaskState.LOST])


@given(claims)
def test_only_a_started_task_can_be_lost(current: Claim) -> None:
    lost = lost_claim(current)
    if current[0] is TaskState.STARTED:
        assert lost == (TaskState.LOST, current[1], current[2])
    else:
        assert lost is None
    if current[0] in TERMINAL or current[0] is TaskState.PENDING:
        assert lost is None


@given(moments, attempts)
def test_lost_wins_over_the_started_claim_it_replaces(at: datetime, attempt: int) -> None:
    started: Claim = (TaskState.STARTED, at, attempt)
    lost = lost_claim(started)
    assert lost is not None
    assert winner(started, lost) == lost
    # and a duplicate of that start, arriving late, does not bring it back
    assert winner(lost, started) == lost


@given(moments, attempts, real_states, moments, attempts)
def test_a_later_real_event_wins_over_lost(
    at: datetime, attempt: int, state: TaskState, later_at: datetime, later_attempt: int
) -> None:
    lost = lost_claim((TaskState.STARTED, at, attempt))
    assert lost is not None
    real: Claim = (state, later_at, later_attempt)
    outcome = winner(lost, real)
    if state is TaskState.PENDING:
        assert outcome == lost  # a task_sent never drags a task back to waiting
    elif (later_attempt, later_at) > (attempt, at):
        assert outcome == real
    elif (later_attempt, later_at) == (attempt, at):
        # the same instant: an outcome of the task says more than lost, a start or retry less
        finishes = (TaskState.SUCCEEDED, TaskState.FAILED, TaskState.CANCELLED)
        assert outcome == (real if state in finishes else lost)
    else:
        assert outcome == lost


@given(
    states,
    st.integers(0, 1000),
    st.one_of(st.none(), st.integers(-100, 1000)),
)
def test_silence_past_the_grace_makes_a_started_task_lost(
    state: TaskState, grace_s: int, silent_s: int | None
) -> None:
    now = BASE
    last_seen = None if silent_s is None else now - timedelta(seconds=silent_s)
    reason = lost_reason(state, now, last_seen, timedelta(seconds=grace_s))
    if state is not TaskState.STARTED:
        assert reason is None
    elif silent_s is None:
        assert reason == "its worker was never heard from"
    elif silent_s > grace_s:
        assert reason is not None
        assert f"{silent_s} s" in reason
    else:
        assert reason is None


@given(states)
def test_lost_is_retriable_like_failed(state: TaskState) -> None:
    assert is_retriable(state) == (state in (TaskState.FAILED, TaskState.LOST))
    assert (state.value in retriable_states()) == is_retriable(state)


def test_the_task_list_filters_by_every_state_including_lost() -> None:
    assert set(retriable_states()) <= set(TASK_STATES)
    assert "lost" in TASK_STATES


@given(
    states,
    st.one_of(st.none(), st.text(max_size=20)),
    st.integers(-100, 10_000),
    st.sampled_from([1, 5, 60, 600]),
)
def test_a_pending_task_without_a_start_gets_a_notice_after_a_while(
    state: TaskState, worker: str | None, waited_s: int, after_s: int
) -> None:
    after = timedelta(seconds=after_s)
    notice = unreported_start(state, worker, BASE - timedelta(seconds=waited_s), BASE, after)
    if state is TaskState.PENDING and waited_s > after_s:
        assert notice is not None
        assert "-E" in notice
        assert (f"by {worker} " in notice) == bool(worker)
    else:
        assert notice is None
    assert unreported_start(state, worker, None, BASE, after) is None


@given(st.integers(0, 100), st.integers(0, 100))
def test_an_agent_is_flagged_only_while_nothing_of_it_moved(waiting: int, moved: int) -> None:
    assert agent_sends_no_starts(waiting, moved) == (waiting > 0 and moved == 0)


@given(
    states,
    st.integers(1, 300),
    st.integers(0, 1000),
    st.one_of(st.none(), st.booleans()),
    st.integers(-100, 1000),
)
def test_a_worker_that_stops_listing_a_started_task_loses_it(
    state: TaskState, grace_s: int, listed_after_s: int, listed: bool | None, silent_s: int
) -> None:
    grace = timedelta(seconds=grace_s)
    changed = BASE - timedelta(seconds=2000)
    reason = lost_reason(
        state,
        BASE,
        BASE - timedelta(seconds=silent_s),
        grace,
        changed_at=changed,
        listed_at=changed + timedelta(seconds=listed_after_s),
        listed=listed,
    )
    silent = silent_s > grace_s
    dropped = listed is False and listed_after_s > grace_s
    if state is not TaskState.STARTED:
        assert reason is None
    elif silent:
        assert reason is not None
        assert "silent" in reason
    elif dropped:
        assert reason is not None
        assert "no longer lists it" in reason
    else:
        # listed, no list at all, or a list too soon after the news to be sure
        assert reason is None
