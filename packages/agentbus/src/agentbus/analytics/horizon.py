"""How far the ingester may read ``events`` without passing over a transaction that commits late:
pure functions, property-tested.

An ``events`` row's ``event_id`` is a UUIDv7 drawn when the row is inserted, and every such
insert is made by a trigger after its transaction's first write, so the transaction already
holds its id (xid) by then. Transaction ids are handed out in time order. Each pass notes a
``Mark``: the time, then, in a later statement, the next xid PostgreSQL will hand out. Any
transaction holding an xid below that number got it before the mark's time; any other one got
it after, so every row it writes carries a later time. When the oldest xid still running is at
least a mark's number, every transaction that could write a row dated before that mark has
ended, and what it committed is visible. Reading up to the newest such mark never passes over a
row that shows up later.

Transactions of other databases on the same server hold ids too, but they never write this
database's ``events``: the oldest running transaction is looked for among this database's own
(``pg_locks``, which reports each transaction id, in 32 bits, beside the session holding it).

This assumes the database server's clock does not step back; a row written in a stretch that a
backward step repeats could be dated below a cursor already past it.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

__all__ = ["Mark", "safe_mark", "uuid_floor", "widen"]

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass(frozen=True)
class Mark:
    """A pass's note: ``at``, then the next transaction id to be handed out."""

    at: datetime
    next_xid: int


def safe_mark(marks: Sequence[Mark], oldest_running_xid: int) -> Mark | None:
    """The newest mark no running transaction predates (``oldest_running_xid``: the oldest
    transaction id still running, or the next one when none runs); None while there is none."""
    passed = [m for m in marks if m.next_xid <= oldest_running_xid]
    return max(passed, key=lambda m: (m.next_xid, m.at), default=None)


def uuid_floor(at: datetime) -> uuid.UUID:
    """The smallest UUIDv7 PostgreSQL can draw at ``at``: its ``uuidv7()`` puts the millisecond
    in the first 48 bits and the fraction of it in the next 12 (after the version), so every
    UUIDv7 drawn earlier sorts below this one, as PostgreSQL compares uuids (bytewise)."""
    micros = (at - EPOCH) // timedelta(microseconds=1)
    ms, within = divmod(micros, 1000)
    fraction = within * 4096 // 1000
    return uuid.UUID(int=(ms << 80) | (0x7 << 76) | (fraction << 64) | (0x2 << 62))


def widen(xid: int, near: int) -> int:
    """The 64-bit transaction id whose low 32 bits are ``xid`` (as ``pg_locks`` shows it) and
    which lies within 2**31 of ``near`` (a 64-bit id read meanwhile): PostgreSQL never lets a
    transaction id in use grow older than that."""
    offset = (xid - near + (1 << 31)) % (1 << 32) - (1 << 31)
    return near + offset
