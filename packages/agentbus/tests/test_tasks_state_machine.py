"""The task state machine (00-CONVENTIONS.md §4): every (state, event, party) cell against the
table as the document writes it, then properties over random event sequences."""

from __future__ import annotations

import itertools

import pytest
from agentbus.tasks.domain import (
    OPEN,
    PARTY_OF,
    TERMINAL,
    Event,
    Party,
    State,
    decide,
)
from hypothesis import given, settings
from hypothesis import strategies as st

# The table of conventions §4, transcribed cell by cell. "-" is a no-op; AB codes are refusals.
# Columns: delivered (request transport-acked), accept, reject, progress, complete, fail, cancel,
# expire, dead_letter (§4 prose: a dead-lettered request fails the task), budget_exceeded (a
# reported spend past the budget stops the task, docs/decisions/0031).
COLUMNS = (  # noqa: SIM905 - a table row reads better as one line
    "delivered accept reject progress complete fail cancel expire dead_letter budget_exceeded"
).split()
TABLE = {
    "submitted": "delivered accepted rejected AB-6004 AB-6004 AB-6004 cancelled expired failed"
    " cancelled",
    "delivered": "- accepted rejected AB-6004 AB-6004 AB-6004 cancelled expired failed cancelled",
    "accepted": "- AB-6004 AB-6004 in_progress completed failed cancelled expired - cancelled",
    "in_progress": "- AB-6004 AB-6004 in_progress completed failed cancelled expired - cancelled",
    "completed": "- AB-6003 AB-6003 AB-6003 AB-6003 AB-6003 AB-6003 - - -",
    "failed": "- AB-6003 AB-6003 AB-6003 AB-6003 AB-6003 AB-6003 - - -",
    "rejected": "- AB-6003 AB-6003 AB-6003 AB-6003 AB-6003 AB-6003 - - -",
    "cancelled": "- AB-6003 AB-6003 AB-6003 AB-6003 AB-6003 AB-6003 - - -",
    "expired": "- AB-6003 AB-6003 AB-6003 AB-6003 AB-6003 AB-6003 - - -",
}
RIGHT_PARTY = {
    "delivered": "system", "accept": "recipient", "reject": "recipient",
    "progress": "recipient", "complete": "recipient", "fail": "recipient",
    "cancel": "requester", "expire": "system", "dead_letter": "system",
    "budget_exceeded": "system",
}  # fmt: skip

CELLS = [
    (state, event, cell)
    for state, row in TABLE.items()
    for event, cell in zip(COLUMNS, row.split(), strict=True)
]


def test_the_table_covers_every_state_and_event() -> None:
    assert set(TABLE) == {s.value for s in State}
    assert set(COLUMNS) == {e.value for e in Event}
    assert {e.value: p.value for e, p in PARTY_OF.items()} == RIGHT_PARTY


@pytest.mark.parametrize(("state", "event", "cell"), CELLS)
def test_cell_for_the_right_party(state: str, event: str, cell: str) -> None:
    decision = decide(State(state), Event(event), Party(RIGHT_PARTY[event]))
    if cell == "-":
        assert decision.allowed
        assert not decision.changes
        assert not decision.record
    elif cell.startswith("AB-"):
        assert decision.refusal == cell
        assert not decision.changes
    else:
        assert decision.allowed
        assert decision.to == State(cell)
        # Only a repeated progress leaves no transition row (footnote 2).
        assert decision.record is not (state == "in_progress" and event == "progress")


@pytest.mark.parametrize(
    ("state", "event", "party"),
    [
        (s, e, p)
        for s, e, p in itertools.product(State, Event, Party)
        if p.value != RIGHT_PARTY[e.value]
    ],
)
def test_every_wrong_party_is_refused_before_anything_else(
    state: State, event: Event, party: Party
) -> None:
    decision = decide(state, event, party)
    assert decision.refusal == "AB-6005"
    assert not decision.changes


# -- properties ------------------------------------------------------------------------------

moves = st.tuples(st.sampled_from(list(Event)), st.sampled_from(list(Party)))


def run(state: State, steps: list[tuple[Event, Party]]) -> tuple[State, list[State]]:
    """Apply allowed decisions; return the final state and every state recorded on the way."""
    recorded = [state]
    for event, party in steps:
        decision = decide(state, event, party)
        if decision.to is not None:
            state = decision.to
            if decision.record:
                recorded.append(state)
    return state, recorded


@settings(max_examples=400, deadline=None)
@given(st.sampled_from(sorted(TERMINAL)), st.lists(moves, max_size=30))
def test_terminal_states_absorb(start: State, steps: list[tuple[Event, Party]]) -> None:
    final, recorded = run(start, steps)
    assert final == start
    assert recorded == [start]


@settings(max_examples=400, deadline=None)
@given(st.sampled_from(list(State)), st.lists(moves, max_size=30))
def test_only_the_named_party_ever_moves_a_task(
    start: State, steps: list[tuple[Event, Party]]
) -> None:
    state = start
    for event, party in steps:
        decision = decide(state, event, party)
        if decision.changes:
            assert party is PARTY_OF[event]
            assert decision.allowed
            state = decision.to  # type: ignore[assignment]  # changes implies a target
        elif not decision.allowed:
            assert decision.refusal in {"AB-6003", "AB-6004", "AB-6005"}


@settings(max_examples=400, deadline=None)
@given(st.lists(moves, max_size=40))
def test_a_task_never_goes_back_and_leaves_terminal_never(
    steps: list[tuple[Event, Party]],
) -> None:
    rank = {
        State.SUBMITTED: 0,
        State.DELIVERED: 1,
        State.ACCEPTED: 2,
        State.IN_PROGRESS: 3,
    }
    _final, recorded = run(State.SUBMITTED, steps)
    open_part = [s for s in recorded if s in OPEN]
    assert [rank[s] for s in open_part] == sorted(rank[s] for s in open_part)
    terminal_at = [i for i, s in enumerate(recorded) if s in TERMINAL]
    assert len(terminal_at) <= 1
    if terminal_at:
        assert terminal_at[0] == len(recorded) - 1
    # each recorded row is a real change of state
    assert all(a != b for a, b in itertools.pairwise(recorded))


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(sorted(OPEN)))
def test_cancel_and_expire_end_every_open_task(state: State) -> None:
    assert decide(state, Event.CANCEL, Party.REQUESTER).to is State.CANCELLED
    assert decide(state, Event.EXPIRE, Party.SYSTEM).to is State.EXPIRED
