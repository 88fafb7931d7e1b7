"""The sidecar's local SQLite store, state.db (data model §7): one module per table group.

db         location, pragmas (WAL, synchronous FULL), migrations, transactions
schema     the §7 DDL, versioned by PRAGMA user_version
inbox      custody, dedupe, presentation, application acks
outbox     sends, acks and naks waiting for the gateway, with backoff
receipts   what the gateway accepted from us
meta       meta and adapter_state key-values
usage      usage_local: usage records captured from the harness, until uploaded
retention  local retention rules
"""

from agentbus_sidecar.store.db import open_store, state_db_path, transaction

__all__ = ["open_store", "state_db_path", "transaction"]
