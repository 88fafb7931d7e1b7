"""The schema document reflects the live catalog, deterministically."""

from __future__ import annotations

import psycopg
from platformkit.db.migrator import Migrator
from platformkit.db.schemadoc import render


async def test_renders_tables_columns_and_policies(
    fresh_database: str, kit_migrator: Migrator
) -> None:
    await kit_migrator.migrate(fresh_database)
    with psycopg.connect(fresh_database) as conn:
        first = render(conn, ["public"], "kit")
        conn.execute("CREATE INDEX notes_body ON notes (body)")
        conn.commit()
        second = render(conn, ["public"], "kit")
    assert "## notes" in first
    assert "| tags | text[] |  | '{}'::text[] |" in first
    assert "Row-level security: enabled, forced." in first
    assert "policy tenant_isolation" in first
    assert "schema_migrations" not in first
    assert first != second
    assert "notes_body" in second
