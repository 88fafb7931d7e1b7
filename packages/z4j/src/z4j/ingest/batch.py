"""One agent's event batch into PostgreSQL, where one bad event never loses the others.

The hot path is one transaction for the whole batch. A batch whose parse found something
PostgreSQL may refuse is screened first (``z4j.domain.storable_events``): bad text is repaired
and marked, unstorable numbers refuse their event alone. Should the database still refuse the
batch for its data, it is written again one event at a time, each in its own savepoint, and
only the events the database refuses are left out, each with its reason.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import psycopg

from z4j.brain import Brain, signal_change
from z4j.domain.storable_events import Refusal, Screened, event_id_of, screen_events
from z4j.ingest import metrics, project_keys
from z4j.ingest.fold import Folded, fold_batch
from z4j.store import agents as agent_store
from z4j.store.ingest import write_folded

log = logging.getLogger("z4j.ingest")

# What the data of one event can make the write raise: PostgreSQL's data exceptions (class 22:
# untranslatable characters, numbers out of range, ...) and the encoder's refusals before it.
DATA_ERRORS = (psycopg.DataError, ValueError, TypeError, OverflowError)
# refusals named in an ack; the counts always cover all of them
MAX_REFUSALS_LISTED = 100


@dataclass
class BatchOutcome:
    received: int
    accepted: int = 0
    refused: list[Refusal] = field(default_factory=list)
    repaired: int = 0


async def ingest_batch(
    brain: Brain,
    project_id: uuid.UUID,
    agent_id: uuid.UUID,
    events: list[Any],
    *,
    suspect: bool,
    worker_id: str | None = None,
) -> BatchOutcome:
    """Store ``events``; ``suspect`` is the parse's verdict that the batch may hold values
    PostgreSQL cannot store (``platformkit.boundedjson.loads_for_storage``); ``worker_id`` is
    the sending connection's worker."""
    screened = screen_events(events) if suspect else Screened(events)
    outcome = BatchOutcome(len(events), refused=list(screened.refused), repaired=screened.repaired)
    keys = await project_keys.redact_keys(brain, project_id)
    folded = fold_batch(project_id, screened.events, keys)
    try:
        # One round trip for the writes (pipelined), one for the commit; the change signal
        # goes out with the commit, so a dashboard never wakes up before the rows are visible.
        async with brain.project_tx(project_id) as conn, conn.pipeline():
            await write_folded(conn, project_id, agent_id, folded, worker_id)
            await agent_store.touch(conn, agent_id, datetime.now(UTC))
            await signal_change(conn)
    except DATA_ERRORS:
        outcome.accepted = await _one_by_one(
            brain, project_id, agent_id, screened, outcome, worker_id, keys
        )
    else:
        outcome.accepted = folded.accepted
        outcome.refused += [_at(screened, r) for r in folded.refused]
        metrics.observe(project_id, folded)
    outcome.refused.sort(key=lambda r: r.index)
    for refusal in outcome.refused[:MAX_REFUSALS_LISTED]:
        log.warning(
            "agent %s: event %s (batch position %d) refused: %s",
            agent_id,
            refusal.event_id,
            refusal.index,
            refusal.reason,
        )
    return outcome


async def _one_by_one(
    brain: Brain,
    project_id: uuid.UUID,
    agent_id: uuid.UUID,
    screened: Screened,
    outcome: BatchOutcome,
    worker_id: str | None,
    keys: tuple[str, ...],
) -> int:
    accepted = 0
    stored: list[Folded] = []
    async with brain.project_tx(project_id) as conn:
        for index, event in enumerate(screened.events):
            folded = fold_batch(project_id, [event], keys)
            try:
                async with conn.transaction():
                    await write_folded(conn, project_id, agent_id, folded, worker_id)
            except DATA_ERRORS as exc:
                reason = f"not storable: {_describe(exc)}"
                outcome.refused.append(
                    Refusal(screened.position(index), event_id_of(event), reason)
                )
                continue
            accepted += folded.accepted
            stored.append(folded)
            outcome.refused += [
                _at(screened, Refusal(index, r.event_id, r.reason)) for r in folded.refused
            ]
        await agent_store.touch(conn, agent_id, datetime.now(UTC))
        await signal_change(conn)
    for folded in stored:
        metrics.observe(project_id, folded)
    return accepted


def _at(screened: Screened, refusal: Refusal) -> Refusal:
    """``refusal`` with its index in the screened events turned into its batch position."""
    return Refusal(screened.position(refusal.index), refusal.event_id, refusal.reason)


def _describe(exc: BaseException) -> str:
    if isinstance(exc, psycopg.Error) and exc.diag.message_primary:
        return f"{type(exc).__name__}: {exc.diag.message_primary}"[:200]
    return type(exc).__name__
