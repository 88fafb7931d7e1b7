"""docs/strataplane/schema.md is what the migrations produce; a schema change must update it."""

from __future__ import annotations

from pathlib import Path

from strataplane.cli import render_schema_doc

DOC = Path(__file__).resolve().parents[3] / "docs" / "strataplane" / "schema.md"


def test_schema_doc_matches_migrations(strataplane_database: str) -> None:
    live = render_schema_doc(strataplane_database)
    assert DOC.exists(), f"generate it: uv run strataplane schema-doc --output {DOC}"
    assert DOC.read_text(encoding="utf-8") == live, (
        "docs/strataplane/schema.md is out of date; regenerate it with "
        "`uv run strataplane schema-doc --database-url URL --output docs/strataplane/schema.md`"
    )
