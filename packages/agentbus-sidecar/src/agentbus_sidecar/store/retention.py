"""Local retention (data model §7): inbox rows 7 days after ``read_at``, receipts after 30
days, ``seen_msg_ids`` after 7 days, uploaded ``usage_local`` rows after 7 days (the gateway
keeps them). Outbox rows are deleted on success by their senders, so
nothing here touches the outbox.

An unread inbox row is kept however old it is: it is still owed to the agent, and its primary
key keeps deduplicating its id after the ``seen_msg_ids`` row is gone (05 §10.4).
"""

from __future__ import annotations

import sqlite3
from datetime import datetime, timedelta

from agentbus_sidecar.clock import format_ts
from agentbus_sidecar.store.db import transaction

__all__ = ["INBOX_AFTER_READ", "RECEIPTS", "SEEN", "USAGE_UPLOADED", "prune"]

INBOX_AFTER_READ = timedelta(days=7)
RECEIPTS = timedelta(days=30)
SEEN = timedelta(days=7)
USAGE_UPLOADED = timedelta(days=7)


def prune(conn: sqlite3.Connection, now: datetime) -> dict[str, int]:
    """Delete what retention allows; returns the number of rows removed per table."""
    with transaction(conn):
        inbox = conn.execute(
            "DELETE FROM inbox WHERE read_at IS NOT NULL AND read_at < ?",
            (format_ts(now - INBOX_AFTER_READ),),
        ).rowcount
        receipts = conn.execute(
            "DELETE FROM receipts WHERE accepted_at < ?", (format_ts(now - RECEIPTS),)
        ).rowcount
        seen = conn.execute(
            "DELETE FROM seen_msg_ids WHERE seen_at < ?", (format_ts(now - SEEN),)
        ).rowcount
        usage = conn.execute(
            "DELETE FROM usage_local WHERE uploaded = 1 AND recorded_at < ?",
            (format_ts(now - USAGE_UPLOADED),),
        ).rowcount
    return {"inbox": inbox, "receipts": receipts, "seen_msg_ids": seen, "usage_local": usage}
