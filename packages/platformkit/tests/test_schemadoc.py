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


async def test_triggers_are_listed_with_their_timing_and_not_as_constraints(
    fresh_database: str, kit_migrator: Migrator
) -> None:
    await kit_migrator.migrate(fresh_database)
    with psycopg.connect(fresh_database) as conn:
        conn.execute(
            "CREATE FUNCTION notes_touch() RETURNS trigger LANGUAGE plpgsql"
            " AS $$ BEGIN RETURN NULL; END $$"
        )
        conn.execute(
            "CREATE CONSTRAINT TRIGGER notes_touch AFTER INSERT ON notes"
            " DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION notes_touch()"
        )
        conn.commit()
        doc = render(conn, ["public"], "kit")
    assert "Triggers:" in doc
    assert "CONSTRAINT TRIGGER notes_touch AFTER INSERT ON public.notes DEFERRABLE" in doc
    assert "- TRIGGER" not in doc
