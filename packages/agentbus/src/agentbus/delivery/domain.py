"""Delivery rules that need no I/O: message status moves, constants, nak backoff, pull triage.

Message status (05-DELIVERY-SEMANTICS.md §2.1): every update in the store is conditional on the
statuses this module says a move may start from (``UPDATE ... WHERE status = ANY(FROM[to])``), so
two handlers racing can never move a message backwards.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum


class Status(StrEnum):
    ACCEPTED = "accepted"
    FETCHED = "fetched"
    DELIVERED = "delivered"
    READ = "read"
    EXPIRED = "expired"
    DEAD_LETTERED = "dead_lettered"
    DISCARDED = "discarded"
    BRIDGED = "bridged"


TERMINAL = frozenset(
    {Status.READ, Status.EXPIRED, Status.DEAD_LETTERED, Status.DISCARDED, Status.BRIDGED}
)

_A, _F, _D = Status.ACCEPTED, Status.FETCHED, Status.DELIVERED
ALLOWED: frozenset[tuple[Status, Status]] = frozenset(
    {(_A, to) for to in (_F, Status.EXPIRED, Status.DEAD_LETTERED, Status.DISCARDED,
                         Status.BRIDGED)}
    | {(_F, to) for to in (_F, _D, Status.READ, Status.EXPIRED, Status.DEAD_LETTERED,
                           Status.DISCARDED)}
    | {(_D, Status.READ), (_D, Status.EXPIRED)}
    | {(Status.DEAD_LETTERED, _A)}  # redrive, the single way out of a terminal status
)  # fmt: skip


def can_move(current: Status, to: Status) -> bool:
    return (current, to) in ALLOWED


def sources(to: Status) -> list[str]:
    """The statuses a move to ``to`` may start from, for ``status = ANY(%s)``."""
    return sorted(s.value for s, t in ALLOWED if t is to)


# Platform constants (00-CONVENTIONS.md §7, 05 §2.3).
ACK_WAIT_S = 30
MAX_DELIVER = 10
MAX_ACK_PENDING = 1000
MAX_WAITING = 16
MAX_BATCH = 100
MAX_BYTES = 4 * 1024 * 1024
MAX_WAIT_S = 30
DEFAULT_WAIT_S = 25
MAX_SETTLE_ITEMS = 500
MAX_NAK_DELAY_MS = 3_600_000
DLQ_SWEEP_IDLE_S = 60

# dlq_reason values (05 §7.2).
MAX_DELIVERIES = "max_deliveries"
PAYLOAD_INTEGRITY = "payload_integrity"
PUBLISH_EXHAUSTED = "publish_exhausted"
REJECTED_BY_RECIPIENT = "rejected_by_recipient:"
TERM_REASONS = frozenset({"signature_invalid", "envelope_invalid", "schema_unknown"})


def default_nak_delay_ms(attempt: int) -> int:
    """05 §6.1: ``min(1000 * 2^(attempt-1), 300000)`` ms."""
    return min(1000 << min(max(0, attempt - 1), 20), 300_000)


class Triage(StrEnum):
    """What the gateway does with one copy it pulled (05 §4 step 3)."""

    GONE = "gone"  # row gone (retention): term, no status to change
    DUPLICATE = "duplicate"  # terminal or already transport-acked: ack and drop
    EXPIRED = "expired"  # past expires_at: term, status expired
    AHEAD = "ahead"  # a redrive's copy, pulled before the redrive committed: nak, soon again
    DELIVER = "deliver"  # decrypt, re-inline, hand out


@dataclass(frozen=True)
class CopyState:
    """The PostgreSQL facts triage needs about one pulled copy."""

    status: Status
    transport_acked: bool
    expires_at: datetime | None
    stream_seq: int | None = None  # the row's, the copy it last published


def triage(state: CopyState | None, now: datetime, copy_seq: int = 0) -> Triage:
    """``copy_seq``: the pulled copy's stream sequence. A redrive publishes a new copy before
    its transaction commits (``gateway/actions/redrive.py``), so a copy newer than the sequence of a
    row still ``dead_lettered`` is that redrive's, and waits for its commit."""
    if state is None:
        return Triage.GONE
    if state.status is Status.DEAD_LETTERED and copy_seq > (state.stream_seq or 0):
        return Triage.AHEAD
    if state.status in TERMINAL or state.status is Status.DELIVERED or state.transport_acked:
        return Triage.DUPLICATE
    if state.expires_at is not None and state.expires_at <= now:
        return Triage.EXPIRED
    return Triage.DELIVER


REDRIVE_AHEAD_NAK_MS = 1000


def redrive_refusal(
    status: Status,
    expires_at: datetime | None,
    now: datetime,
    recipient_status: str | None,
    task_request: bool,
) -> str | None:
    """Why a message may not be redriven (05 §7.4), or None. ``recipient_status``: its
    recipient agent's, None when there is none."""
    if status is not Status.DEAD_LETTERED:
        return f"the message is {status.value}, not dead_lettered"
    if expires_at is not None and expires_at <= now:
        return "the message has expired"
    if recipient_status is None or recipient_status == "deleted":
        return "the recipient no longer exists"
    if task_request:
        return "its task failed when it was dead-lettered; request the task again"
    return None


def message_id_of(nats_msg_id: str) -> str:
    """The ``msg_`` id in a ``Nats-Msg-Id`` header, without the suffix of a redrive's copy
    (``:r...``)."""
    return nats_msg_id.split(":", 1)[0]
