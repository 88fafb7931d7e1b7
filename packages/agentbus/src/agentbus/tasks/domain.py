"""The task state machine of 00-CONVENTIONS.md §4 as one pure function.

``decide(state, event, party)`` answers what an event does to a task in ``state`` when made by
``party``: a move (the new state and whether a ``task_transitions`` row is written), a no-op, or
a refusal carrying the AB code. Nothing here touches the database; the store applies decisions.

Who may make each move (Decision, from the table's "caller" column and §3.3 directions):

- ``accept``, ``reject``, ``progress``, ``complete``, ``fail``: the recipient;
- ``cancel``: the requester;
- ``delivered`` (the request was transport-acked), ``expire`` (deadline or request expiry),
  ``dead_letter`` (the request was dead-lettered), ``budget_exceeded`` (the task's reported
  spend passed its budget; it stops the task as ``cancelled``): the system only.

Order of checks: party (AB-6005), then terminal (AB-6003), then the table (AB-6004), so a wrong
party learns nothing about the task's state.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class State(StrEnum):
    SUBMITTED = "submitted"
    DELIVERED = "delivered"
    ACCEPTED = "accepted"
    IN_PROGRESS = "in_progress"
    COMPLETED = "completed"
    FAILED = "failed"
    REJECTED = "rejected"
    CANCELLED = "cancelled"
    EXPIRED = "expired"


class Event(StrEnum):
    DELIVERED = "delivered"
    ACCEPT = "accept"
    REJECT = "reject"
    PROGRESS = "progress"
    COMPLETE = "complete"
    FAIL = "fail"
    CANCEL = "cancel"
    EXPIRE = "expire"
    DEAD_LETTER = "dead_letter"
    BUDGET_EXCEEDED = "budget_exceeded"


class Party(StrEnum):
    REQUESTER = "requester"
    RECIPIENT = "recipient"
    SYSTEM = "system"


TERMINAL = frozenset(
    {State.COMPLETED, State.FAILED, State.REJECTED, State.CANCELLED, State.EXPIRED}
)
OPEN = frozenset(State) - TERMINAL

PARTY_OF: dict[Event, Party] = {
    Event.DELIVERED: Party.SYSTEM,
    Event.ACCEPT: Party.RECIPIENT,
    Event.REJECT: Party.RECIPIENT,
    Event.PROGRESS: Party.RECIPIENT,
    Event.COMPLETE: Party.RECIPIENT,
    Event.FAIL: Party.RECIPIENT,
    Event.CANCEL: Party.REQUESTER,
    Event.EXPIRE: Party.SYSTEM,
    Event.DEAD_LETTER: Party.SYSTEM,
    Event.BUDGET_EXCEEDED: Party.SYSTEM,
}

# Events whose "-" cell in the table means "nothing happens" rather than a refusal: the system
# learns of a transport ack or an expiry late, and a dead letter of a request already answered.
_IGNORED_WHEN_MOOT = frozenset(
    {Event.DELIVERED, Event.EXPIRE, Event.DEAD_LETTER, Event.BUDGET_EXCEEDED}
)

_S, _E = State, Event
# (state, event) -> new state, for every move the table allows; everything else open is AB-6004.
MOVES: dict[tuple[State, Event], State] = {
    (_S.SUBMITTED, _E.DELIVERED): _S.DELIVERED,
    (_S.SUBMITTED, _E.ACCEPT): _S.ACCEPTED,
    (_S.SUBMITTED, _E.REJECT): _S.REJECTED,
    (_S.SUBMITTED, _E.DEAD_LETTER): _S.FAILED,
    (_S.DELIVERED, _E.ACCEPT): _S.ACCEPTED,
    (_S.DELIVERED, _E.REJECT): _S.REJECTED,
    (_S.DELIVERED, _E.DEAD_LETTER): _S.FAILED,
    (_S.ACCEPTED, _E.PROGRESS): _S.IN_PROGRESS,
    (_S.ACCEPTED, _E.COMPLETE): _S.COMPLETED,
    (_S.ACCEPTED, _E.FAIL): _S.FAILED,
    (_S.IN_PROGRESS, _E.PROGRESS): _S.IN_PROGRESS,
    (_S.IN_PROGRESS, _E.COMPLETE): _S.COMPLETED,
    (_S.IN_PROGRESS, _E.FAIL): _S.FAILED,
}
for _open in OPEN:
    MOVES[(_open, _E.CANCEL)] = _S.CANCELLED
    MOVES[(_open, _E.EXPIRE)] = _S.EXPIRED
    MOVES[(_open, _E.BUDGET_EXCEEDED)] = _S.CANCELLED

ERROR_CODE: dict[Event, str] = {
    Event.EXPIRE: "AB-6010",
    Event.DEAD_LETTER: "AB-6011",
    Event.BUDGET_EXCEEDED: "AB-6012",
}
"""``tasks.error_code`` set by system events; reject and fail carry the recipient's code."""


@dataclass(frozen=True)
class Decision:
    """``to`` is None for a no-op; ``record`` says whether a transition row is written."""

    to: State | None
    record: bool = True
    refusal: str | None = None  # AB code: AB-6003, AB-6004 or AB-6005

    @property
    def allowed(self) -> bool:
        return self.refusal is None

    @property
    def changes(self) -> bool:
        return self.to is not None


NOOP = Decision(None, record=False)


def decide(state: State, event: Event, party: Party) -> Decision:
    """What ``event`` by ``party`` does to a task in ``state``."""
    if PARTY_OF[event] is not party:
        return Decision(None, record=False, refusal="AB-6005")
    if state in TERMINAL:
        if event in _IGNORED_WHEN_MOOT:
            return NOOP
        return Decision(None, record=False, refusal="AB-6003")
    target = MOVES.get((state, event))
    if target is None:
        if event in _IGNORED_WHEN_MOOT:
            return NOOP
        return Decision(None, record=False, refusal="AB-6004")
    # Repeated progress only updates tasks.progress (footnote 2 of the table).
    record = not (state is State.IN_PROGRESS and event is Event.PROGRESS)
    return Decision(target, record=record)


TIMESTAMP_OF: dict[State, str] = {
    State.DELIVERED: "delivered_at",
    State.ACCEPTED: "accepted_at",
    State.IN_PROGRESS: "started_at",
    State.COMPLETED: "finished_at",
    State.FAILED: "finished_at",
    State.REJECTED: "finished_at",
    State.CANCELLED: "finished_at",
    State.EXPIRED: "finished_at",
}
"""The ``tasks`` column set when a task enters each state (``accepted`` also fills a missing
``delivered_at``: the answer proves the request arrived, footnote 1)."""

VERB_EVENTS: dict[str, Event] = {
    "accept": Event.ACCEPT,
    "reject": Event.REJECT,
    "progress": Event.PROGRESS,
    "complete": Event.COMPLETE,
    "fail": Event.FAIL,
    "cancel": Event.CANCEL,
}
"""Route verbs (``POST /v1/tasks/{tsk}/<verb>``) and their events."""

TYPE_EVENTS: dict[str, Event] = {f"agentbus.task.{v}.v1": e for v, e in VERB_EVENTS.items()}
REQUEST_TYPE = "agentbus.task.request.v1"
