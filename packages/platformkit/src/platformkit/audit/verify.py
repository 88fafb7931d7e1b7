"""Walking a stored chain and naming the first row that breaks it.

Rows are checked in the order given (read them ``ORDER BY seq``). For each row, in this order:

1. sequence: the first row must carry ``start_seq``, each later one the previous seq + 1; a
   jump forward is ``SEQ_GAP`` (a deleted row), a repeat or step back is ``OUT_OF_ORDER``;
2. link: ``prev_hash`` must equal the previous row's ``hash`` (``start_prev`` for the first
   row) or it is ``PREV_LINK_BROKEN`` (a row removed, inserted or moved);
3. content: ``hash`` must equal ``chain_hash(prev_hash, event)`` or it is ``HASH_MISMATCH``
   (``BAD_EVENT`` if the event is not canonical JSON at all).

The walk stops at the first failure: everything after a break is unanchored, so reporting it
would only repeat the same damage. With a ``checkpoint`` the walk also requires the row at
``checkpoint.seq`` to carry ``checkpoint.hash`` and the rows to reach that far; check the
checkpoint's signature first with ``verify_checkpoint``.
"""

from __future__ import annotations

import hmac
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Protocol

from platformkit.audit.chain import GENESIS, chain_hash
from platformkit.audit.checkpoint import Checkpoint

__all__ = ["BreakReason", "ChainRow", "VerifyResult", "verify_chain"]


class BreakReason(StrEnum):
    HASH_MISMATCH = "hash_mismatch"
    BAD_EVENT = "bad_event"
    PREV_LINK_BROKEN = "prev_link_broken"
    SEQ_GAP = "seq_gap"
    OUT_OF_ORDER = "out_of_order"
    CHECKPOINT_MISMATCH = "checkpoint_mismatch"
    TRUNCATED = "truncated"


class ChainRow(Protocol):
    @property
    def seq(self) -> int: ...
    @property
    def event(self) -> Mapping[str, Any]: ...
    @property
    def prev_hash(self) -> bytes | None: ...
    @property
    def hash(self) -> bytes: ...


@dataclass(frozen=True)
class VerifyResult:
    """Outcome of a walk. ``head_*`` describe the last row that verified."""

    ok: bool
    checked: int
    head_seq: int | None
    head_hash: bytes
    bad_index: int | None = None
    bad_seq: int | None = None
    reason: BreakReason | None = None
    detail: str = ""

    def __bool__(self) -> bool:
        return self.ok


def _same(a: object, b: object) -> bool:
    return isinstance(a, bytes) and isinstance(b, bytes) and hmac.compare_digest(a, b)


def _check_row(
    row: ChainRow, expected_seq: int, expected_prev: bytes, key: bytes | None
) -> tuple[BreakReason, str] | None:
    if row.seq > expected_seq:
        return BreakReason.SEQ_GAP, f"expected seq {expected_seq}, found {row.seq}"
    if row.seq < expected_seq:
        return BreakReason.OUT_OF_ORDER, f"expected seq {expected_seq}, found {row.seq}"
    prev = GENESIS if row.prev_hash is None else row.prev_hash
    if not _same(prev, expected_prev):
        return BreakReason.PREV_LINK_BROKEN, "prev_hash does not match the previous row's hash"
    try:
        recomputed = chain_hash(prev, row.event, key=key)
    except (TypeError, ValueError) as exc:
        return BreakReason.BAD_EVENT, f"event cannot be hashed: {exc}"
    if not _same(recomputed, row.hash):
        return BreakReason.HASH_MISMATCH, "stored hash does not match prev_hash and event"
    return None


def _check_against(row: ChainRow, checkpoint: Checkpoint) -> tuple[BreakReason, str] | None:
    if row.seq != checkpoint.seq or _same(row.hash, checkpoint.hash):
        return None
    return BreakReason.CHECKPOINT_MISMATCH, "hash differs from the checkpoint"


def verify_chain(
    rows: Iterable[ChainRow],
    *,
    start_prev: bytes | None = None,
    start_seq: int = 1,
    key: bytes | None = None,
    checkpoint: Checkpoint | None = None,
) -> VerifyResult:
    """Walk ``rows`` and report the first bad one, if any.

    ``start_prev`` (default ``GENESIS``) and ``start_seq`` let a walk begin after a verified
    point, such as a checkpoint: ``start_prev=cp.hash, start_seq=cp.seq + 1``. Pass ``key`` for
    a keyed chain.
    """
    if checkpoint is not None and checkpoint.seq < start_seq:
        raise ValueError("checkpoint lies before the first row to verify")
    head_hash = GENESIS if start_prev is None else start_prev
    head_seq: int | None = None
    checked = 0
    for row in rows:
        broken = _check_row(row, start_seq + checked, head_hash, key)
        if broken is None and checkpoint is not None:
            broken = _check_against(row, checkpoint)
        if broken is not None:
            reason, detail = broken
            return VerifyResult(
                False, checked, head_seq, head_hash, checked, row.seq, reason, detail
            )
        head_hash, head_seq = row.hash, row.seq
        checked += 1
    if checkpoint is not None and (head_seq is None or head_seq < checkpoint.seq):
        # The missing row is the next one expected; it has no stored seq, so report the
        # seq it should have had.
        return VerifyResult(
            False,
            checked,
            head_seq,
            head_hash,
            checked,
            start_seq + checked,
            BreakReason.TRUNCATED,
            f"rows end before checkpoint seq {checkpoint.seq}",
        )
    return VerifyResult(True, checked, head_seq, head_hash)
