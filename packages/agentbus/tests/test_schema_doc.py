"""docs/agentbus/schema.md is what the migrations produce; a schema change must update it."""

from __future__ import annotations

from pathlib import Path

import psycopg
from agentbus.cli import SCHEMA_DOC_TITLE
from platformkit.db.schemadoc import render

DOC = Path(__file__).resolve().parents[3] / "docs" / "agentbus" / "schema.md"
REGENERATE = "uv run agentbus-gateway schema-doc --database-url URL > docs/agentbus/schema.md"


def test_schema_doc_matches_migrations(agentbus_shared_db: str) -> None:
    with psycopg.connect(agentbus_shared_db) as conn:
        live = render(conn, ["public"], SCHEMA_DOC_TITLE)
    assert DOC.exists(), f"generate it: {REGENERATE}"
    assert DOC.read_text() == live, f"docs/agentbus/schema.md is out of date; run {REGENERATE}"
