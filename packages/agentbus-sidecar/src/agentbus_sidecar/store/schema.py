"""The state.db schema, exactly as data model §7 writes it, and its migrations.

Migrations are numbered scripts; ``PRAGMA user_version`` says how many have run and
``meta.schema_version`` mirrors it (data model §9). Each runs in one transaction together with
the version bump, so a crash leaves the database at the old version or the new one. A database
from a newer sidecar is refused: downgrades are not supported.
"""

from __future__ import annotations

__all__ = ["LATEST", "MIGRATIONS"]

_V1 = """
CREATE TABLE meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);

CREATE TABLE inbox (
    msg_id          TEXT PRIMARY KEY,
    stream_seq      INTEGER NOT NULL,
    conversation_id TEXT NOT NULL,
    type            TEXT NOT NULL,
    from_address    TEXT NOT NULL,
    trace_id        TEXT NOT NULL,
    expires_at      TEXT,
    envelope        BLOB NOT NULL,
    received_at     TEXT NOT NULL,
    transport_acked INTEGER NOT NULL DEFAULT 0,
    presented_at    TEXT,
    read_at         TEXT,
    redelivery      INTEGER NOT NULL DEFAULT 0,
    out_of_order    INTEGER NOT NULL DEFAULT 0,
    attempt         INTEGER NOT NULL DEFAULT 1
);
CREATE INDEX inbox_unread ON inbox (read_at) WHERE read_at IS NULL;
CREATE INDEX inbox_seq    ON inbox (stream_seq);

CREATE TABLE outbox (
    id              TEXT PRIMARY KEY,
    kind            TEXT NOT NULL CHECK (kind IN ('send','ack','nak','heartbeat','usage')),
    body            BLOB NOT NULL,
    created_at      TEXT NOT NULL,
    attempts        INTEGER NOT NULL DEFAULT 0,
    next_attempt_at TEXT NOT NULL,
    last_error      TEXT
);
CREATE INDEX outbox_due ON outbox (next_attempt_at);

CREATE TABLE receipts (
    rcp_id          TEXT PRIMARY KEY,
    msg_id          TEXT NOT NULL,
    stream_seq      INTEGER,
    accepted_at     TEXT NOT NULL,
    to_address      TEXT NOT NULL,
    type            TEXT NOT NULL,
    local_events    TEXT NOT NULL
);

CREATE TABLE seen_msg_ids (
    msg_id      TEXT PRIMARY KEY,
    seen_at     TEXT NOT NULL,
    app_acked   INTEGER NOT NULL DEFAULT 0
);

CREATE TABLE adapter_state (
    adapter     TEXT NOT NULL,
    key         TEXT NOT NULL,
    value       TEXT NOT NULL,
    updated_at  TEXT NOT NULL,
    PRIMARY KEY (adapter, key)
);

CREATE TABLE usage_local (
    id          TEXT PRIMARY KEY,
    recorded_at TEXT NOT NULL,
    body        BLOB NOT NULL,
    uploaded    INTEGER NOT NULL DEFAULT 0
);
"""

# Index i holds the statements that move the schema from version i to i + 1.
MIGRATIONS: tuple[str, ...] = (_V1,)
LATEST = len(MIGRATIONS)
