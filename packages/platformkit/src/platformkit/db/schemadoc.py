"""A Markdown description of a database schema, read from the live catalog.

Each system keeps the output as docs/<system>/schema.md and a test regenerates it from a freshly
migrated database: when a migration changes the schema and the document does not follow, the
test fails and names the difference.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import psycopg

_TABLES = """
SELECT c.oid, n.nspname, c.relname, c.relrowsecurity, c.relforcerowsecurity, c.relkind,
       obj_description(c.oid) AS comment
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = ANY(%s) AND c.relkind IN ('r', 'p') AND NOT c.relispartition
  AND c.relname <> 'schema_migrations'
ORDER BY n.nspname, c.relname
"""
_COLUMNS = """
SELECT a.attname, format_type(a.atttypid, a.atttypmod) AS type, a.attnotnull,
       pg_get_expr(d.adbin, d.adrelid) AS default
FROM pg_attribute a LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
WHERE a.attrelid = %s AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum
"""
_CONSTRAINTS = """
SELECT pg_get_constraintdef(oid) AS def FROM pg_constraint
WHERE conrelid = %s AND contype NOT IN ('n', 't') ORDER BY contype, pg_get_constraintdef(oid)
"""
_TRIGGERS = """
SELECT pg_get_triggerdef(oid) AS def FROM pg_trigger
WHERE tgrelid = %s AND NOT tgisinternal AND tgparentid = 0 ORDER BY tgname
"""
_INDEXES = """
SELECT i.relname AS name, pg_get_indexdef(x.indexrelid) AS def
FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid
WHERE x.indrelid = %s AND NOT x.indisprimary
  AND NOT EXISTS (SELECT 1 FROM pg_constraint k WHERE k.conindid = x.indexrelid)
ORDER BY i.relname
"""
_POLICIES = """
SELECT polname, pg_get_expr(polqual, polrelid) AS using_expr,
       pg_get_expr(polwithcheck, polrelid) AS check_expr
FROM pg_policy WHERE polrelid = %s ORDER BY polname
"""
_ENUMS = """
SELECT n.nspname, t.typname, array_agg(e.enumlabel ORDER BY e.enumsortorder) AS labels
FROM pg_type t JOIN pg_enum e ON e.enumtypid = t.oid JOIN pg_namespace n ON n.oid = t.typnamespace
WHERE n.nspname = ANY(%s) GROUP BY n.nspname, t.typname ORDER BY n.nspname, t.typname
"""


def _rows(
    conn: psycopg.Connection[Any], query: str, params: Sequence[Any]
) -> list[tuple[Any, ...]]:
    return conn.execute(query, params).fetchall()


def render(conn: psycopg.Connection[Any], schemas: Sequence[str], title: str) -> str:
    """Return the Markdown for ``schemas``; deterministic for equal schemas."""
    out = [
        f"# {title}",
        "",
        "Generated from the live catalog after all migrations; do not edit by hand.",
        "",
    ]
    enums = _rows(conn, _ENUMS, [list(schemas)])
    if enums:
        out += ["## Enums", ""]
        out += [f"- `{name}`: {', '.join(labels)}" for _ns, name, labels in enums]
        out.append("")
    for oid, ns, name, rls, force, _kind, comment in _rows(conn, _TABLES, [list(schemas)]):
        qualified = name if ns == "public" else f"{ns}.{name}"
        out += [f"## {qualified}", ""]
        if comment:
            out += [comment, ""]
        out += ["| column | type | null | default |", "|---|---|---|---|"]
        for col, typ, notnull, default in _rows(conn, _COLUMNS, [oid]):
            out.append(f"| {col} | {typ} | {'' if notnull else 'yes'} | {default or ''} |")
        out.append("")
        constraints = _rows(conn, _CONSTRAINTS, [oid])
        if constraints:
            out += ["Constraints:", ""] + [f"- {c}" for (c,) in constraints] + [""]
        triggers = _rows(conn, _TRIGGERS, [oid])
        if triggers:
            out += ["Triggers:", ""] + [f"- `{t}`" for (t,) in triggers] + [""]
        indexes = _rows(conn, _INDEXES, [oid])
        if indexes:
            out += ["Indexes:", ""] + [f"- {n}: `{d}`" for n, d in indexes] + [""]
        if rls:
            policies = _rows(conn, _POLICIES, [oid])
            out += [f"Row-level security: enabled{', forced' if force else ''}.", ""]
            for pol, using, check in policies:
                out.append(
                    f"- policy {pol}: USING ({using})" + (f" WITH CHECK ({check})" if check else "")
                )
            out.append("")
    return "\n".join(out).rstrip() + "\n"
