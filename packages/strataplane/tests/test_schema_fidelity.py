"""The migrated schema is the spec's: every implemented table, column, type, nullability,
default, constraint, index, enum value and forced policy, as spec/strataplane-schema.md lists
them (that document is itself generated from a catalog, so its strings compare exactly)."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

import psycopg
import pytest
from platformkit.testing.services import service_missing
from strataplane.testing import ADDED_TABLES, IMPLEMENTED_TABLES

_CANDIDATES = (
    os.environ.get("STRATAPLANE_SCHEMA_SPEC", ""),
    # CI and every checkout keep shared/ beside the repository.
    str(Path(__file__).resolve().parents[4] / "shared" / "spec" / "strataplane-schema.md"),
    "/work/shared/spec/strataplane-schema.md",
)
_HEADER = "Column\tType\tNull\tDefault\tDescription"


@dataclass
class SpecTable:
    columns: list[tuple[str, str, bool, str]] = field(default_factory=list)
    constraints: set[str] = field(default_factory=set)
    indexes: set[str] = field(default_factory=set)
    policy: str | None = None


@dataclass
class Spec:
    tables: list[str]
    enums: dict[str, list[str]]
    sections: dict[str, SpecTable]


def _spec_path() -> Path:
    for candidate in _CANDIDATES:
        if candidate and Path(candidate).is_file():
            return Path(candidate)
    service_missing("shared/spec/strataplane-schema.md", "set STRATAPLANE_SCHEMA_SPEC to its path")


def parse_spec(text: str) -> Spec:
    lines = text.splitlines()
    listed = next(line for line in lines if line.startswith("Tables: "))
    tables = [t.strip().rstrip(".") for t in listed.removeprefix("Tables: ").split(",")]
    enums: dict[str, list[str]] = {}
    for i, line in enumerate(lines):
        if line.startswith("Type ") and i + 2 < len(lines) and lines[i + 2].startswith("Enum: "):
            values = lines[i + 2].removeprefix("Enum: ").rstrip(".")
            enums[line.removeprefix("Type ")] = [v.strip() for v in values.split(",")]
    start = lines.index("2. Tables")
    sections: dict[str, SpecTable] = {}
    current: SpecTable | None = None
    part = ""
    for line in lines[start + 1 :]:
        if line in tables:
            current = sections[line] = SpecTable()
            part = ""
        elif current is None:
            continue
        elif line == _HEADER:
            part = "columns"
        elif line in ("Constraints:", "Indexes:"):
            part = line
        elif line.startswith("Row-level security (forced): "):
            current.policy = line.split(": ", 1)[1].rstrip(".")
        elif not line:
            part = "" if part == "columns" else part
        elif part == "columns":
            cells = [*line.split("\t"), "", "", ""][:4]
            current.columns.append((cells[0], cells[1], cells[2] == "yes", cells[3]))
        elif part == "Constraints:" and line.startswith("• "):
            current.constraints.add(line[2:])
        elif part == "Indexes:" and line.startswith("• "):
            current.indexes.add(line[2:].split(": ", 1)[0])
    return Spec(tables, enums, sections)


@pytest.fixture(scope="module")
def spec() -> Spec:
    return parse_spec(_spec_path().read_text(encoding="utf-8"))


def _catalog(url: str, table: str) -> SpecTable:
    found = SpecTable()
    with psycopg.connect(url, options="-c search_path=strataplane") as conn:
        oid = conn.execute("SELECT %s::regclass::oid", (table,)).fetchone()
        assert oid is not None
        found.columns = [
            (name, typ, not notnull, default or "")
            for name, typ, notnull, default in conn.execute(
                "SELECT a.attname, format_type(a.atttypid, a.atttypmod), a.attnotnull, "
                "CASE a.attgenerated WHEN 's' THEN 'generated: ' || btrim(regexp_replace("
                "pg_get_expr(d.adbin, d.adrelid), '\\s+', ' ', 'g')) "
                "ELSE pg_get_expr(d.adbin, d.adrelid) END "
                "FROM pg_attribute a LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid "
                "AND d.adnum = a.attnum WHERE a.attrelid = %s "
                "AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum",
                oid,
            )
        ]
        found.constraints = {
            d
            for (d,) in conn.execute(
                "SELECT pg_get_constraintdef(oid) FROM pg_constraint "
                "WHERE conrelid = %s AND contype <> 'n'",
                oid,
            )
        }
        found.indexes = {
            f"{name} " + re.sub(r"^CREATE (UNIQUE )?INDEX \S+ ON \S+ ", r"\1", d).strip()
            for name, d in conn.execute(
                "SELECT i.relname, pg_get_indexdef(x.indexrelid) FROM pg_index x "
                "JOIN pg_class i ON i.oid = x.indexrelid WHERE x.indrelid = %s "
                "AND NOT EXISTS (SELECT 1 FROM pg_constraint k WHERE k.conindid = x.indexrelid)",
                oid,
            )
        }
        row = conn.execute(
            "SELECT c.relrowsecurity AND c.relforcerowsecurity, "
            "(SELECT string_agg(polname, ',') FROM pg_policy WHERE polrelid = c.oid) "
            "FROM pg_class c WHERE c.oid = %s",
            oid,
        ).fetchone()
        assert row is not None
        found.policy = row[1] if row[0] else None
    return found


def test_spec_lists_every_implemented_table(spec: Spec) -> None:
    missing = set(IMPLEMENTED_TABLES) - set(spec.tables)
    assert not missing, f"not in the spec's table list: {sorted(missing)}"
    assert set(IMPLEMENTED_TABLES) <= set(spec.sections)


def test_no_table_outside_the_spec(spec: Spec, strataplane_database: str) -> None:
    with psycopg.connect(strataplane_database) as conn:
        found = {
            r[0]
            for r in conn.execute(
                "SELECT tablename FROM pg_tables WHERE schemaname = 'strataplane'"
            )
        }
    listed = set(IMPLEMENTED_TABLES) | set(ADDED_TABLES)
    assert found == listed, "a table was added or left out; update the list"
    assert found - set(ADDED_TABLES) <= set(spec.tables)
    assert not set(ADDED_TABLES) & set(spec.tables), "the spec has it now: move it to the list"


def test_tables_match_the_spec(spec: Spec, strataplane_database: str) -> None:
    problems: list[str] = []
    for table in IMPLEMENTED_TABLES:
        want, got = spec.sections[table], _catalog(strataplane_database, table)
        assert want.columns, f"the spec section of {table} did not parse"
        if got.columns != want.columns:
            problems.append(f"{table} columns:\n  spec {want.columns}\n  live {got.columns}")
        for label, w, g in (
            ("constraints", want.constraints, got.constraints),
            ("indexes", want.indexes, got.indexes),
        ):
            if w != g:
                problems.append(f"{table} {label}: missing {w - g}, extra {g - w}")
        if got.policy != want.policy:
            problems.append(f"{table} policy: spec {want.policy}, live {got.policy}")
    assert not problems, "\n".join(problems)


def test_enums_match_the_spec(spec: Spec, strataplane_database: str) -> None:
    with psycopg.connect(strataplane_database) as conn:
        live = {
            name: list(labels)
            for name, labels in conn.execute(
                "SELECT t.typname, array_agg(e.enumlabel ORDER BY e.enumsortorder) "
                "FROM pg_type t JOIN pg_enum e ON e.enumtypid = t.oid "
                "JOIN pg_namespace n ON n.oid = t.typnamespace "
                "WHERE n.nspname = 'strataplane' GROUP BY t.typname"
            )
        }
    assert live, "no enum types"
    for name, labels in live.items():
        assert spec.enums.get(name) == labels, name
