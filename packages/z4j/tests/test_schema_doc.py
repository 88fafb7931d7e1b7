"""docs/z4j/schema.md is what the migrations produce; a schema change must update it."""

from __future__ import annotations

from pathlib import Path

import psycopg
from platformkit.db.schemadoc import render

DOC = Path(__file__).resolve().parents[3] / "docs" / "z4j" / "schema.md"


def test_schema_doc_matches_migrations(brain_database: str) -> None:
    with psycopg.connect(brain_database) as conn:
        live = render(conn, ["public"], "z4j database schema")
    assert DOC.exists(), f"generate it: uv run z4j schema-doc --database-url URL > {DOC}"
    assert DOC.read_text() == live, (
        "docs/z4j/schema.md is out of date; regenerate it with "
        "`uv run z4j schema-doc --database-url URL > docs/z4j/schema.md`"
    )


def test_every_spec_table_exists(brain_database: str) -> None:
    spec_tables = {
        "projects",
        "users",
        "memberships",
        "agents",
        "tasks",
        "events",
        "schedules",
        "audit_log",
        "sessions",
        "invitations",
        "password_reset_tokens",
    }
    with psycopg.connect(brain_database) as conn:
        found = {
            r[0]
            for r in conn.execute(
                "SELECT tablename FROM pg_tables WHERE schemaname = 'public'"
            ).fetchall()
        }
    assert spec_tables <= found
