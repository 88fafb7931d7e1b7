"""absurd's schema as a migration source: installed by migrate, upgraded release by release."""

from __future__ import annotations

import absurdctl  # type: ignore[import-untyped]  # ships no type information
import psycopg
import pytest
from platformkit.db.migrator import Migration, MigrationError, Migrator, Source
from platformkit.db.roles import RoleSpec
from platformkit.jobs import absurd_source, absurd_source_from, release_number
from platformkit.testing.databases import DatabaseFactory

ROLES = RoleSpec(owner="jobs_owner", app="jobs_app")
QUEUE_SOURCE = Source("jobs", [Migration(1, "queue", "SELECT absurd.create_queue('work');\n")])
TARGET: str = absurdctl.ABSURD_SCHEMA_TARGET_VERSION
LABEL = f"absurd:{release_number(TARGET):04d}_schema_{TARGET.replace('.', '_')}"


def migrator(absurd: Source) -> Migrator:
    return Migrator("jobs", [absurd, QUEUE_SOURCE], ROLES)


def next_release() -> tuple[str, Source]:
    """A made-up release after the installed one: a full schema and an upgrade step into it."""
    major, minor, patch = (int(p) for p in TARGET.split("."))
    newer = f"{major}.{minor}.{patch + 1}"
    version_fn = (
        "create or replace function absurd.get_schema_version() returns text language sql "
        f"as $$ select '{newer}'::text; $$;\n"
    )
    full = absurdctl.BUNDLED_SCHEMA_SQL.replace(
        f"select '{TARGET}'::text;", f"select '{newer}'::text;"
    )
    assert full != absurdctl.BUNDLED_SCHEMA_SQL
    full += "\ncreate table absurd.fresh_marker (id int);\n"
    step = version_fn + "create table absurd.upgrade_marker (id int);\n"
    steps = {**absurdctl.BUNDLED_MIGRATIONS, f"{TARGET}-{newer}.sql": step}
    return newer, absurd_source_from(newer, full, steps, baseline=TARGET)


def live(url: str, query: str) -> object:
    with psycopg.connect(url) as conn:
        row = conn.execute(query).fetchone()
    return row[0] if row else None


async def test_migrate_installs_absurd_once_as_the_owner(fresh_database: str) -> None:
    m = migrator(absurd_source())
    assert await m.migrate(fresh_database) == [LABEL, "jobs:0001_queue"]
    assert await m.migrate(fresh_database) == []
    assert await m.pending(fresh_database) == []
    assert live(fresh_database, "SELECT absurd.get_schema_version()") == TARGET
    assert (
        live(
            fresh_database,
            "SELECT nspowner::regrole::text FROM pg_namespace WHERE nspname = 'absurd'",
        )
        == "jobs_owner"
    )
    assert (
        live(fresh_database, "SELECT count(*) FROM schema_migrations WHERE component = 'absurd'")
        == 1
    )
    # The queue's tables are the owner's and usable by the app role through default privileges.
    assert (
        live(
            fresh_database,
            "SELECT has_table_privilege('jobs_app', 'absurd.r_work', "
            "'SELECT, INSERT, UPDATE, DELETE')",
        )
        is True
    )
    assert (
        live(
            fresh_database,
            "SELECT has_function_privilege('jobs_app', "
            "'absurd.claim_task(text, text, integer, integer)', "
            "'EXECUTE')",
        )
        is True
    )


async def test_newer_absurdctl_upgrades_with_its_step_and_installs_fresh_in_full(
    fresh_database: str, database_factory: DatabaseFactory
) -> None:
    await migrator(absurd_source()).migrate(fresh_database)
    newer, upgraded = next_release()
    number = f"{release_number(newer):04d}"
    # Already applied releases still verify although their text was generated anew.
    assert await migrator(upgraded).pending(fresh_database) == [
        f"absurd:{number}_schema_{newer.replace('.', '_')}"
    ]
    assert len(await migrator(upgraded).migrate(fresh_database)) == 1
    assert live(fresh_database, "SELECT absurd.get_schema_version()") == newer
    assert live(fresh_database, "SELECT to_regclass('absurd.upgrade_marker')::text") is not None
    assert live(fresh_database, "SELECT to_regclass('absurd.fresh_marker')") is None

    other = database_factory.create()
    try:
        assert len(await migrator(upgraded).migrate(other)) == 3
        assert live(other, "SELECT absurd.get_schema_version()") == newer
        assert live(other, "SELECT to_regclass('absurd.fresh_marker')::text") is not None
        assert live(other, "SELECT to_regclass('absurd.upgrade_marker')") is None
    finally:
        database_factory.drop(other)


async def test_absurd_installed_by_another_role_is_refused(fresh_database: str) -> None:
    with psycopg.connect(fresh_database, autocommit=True) as conn:
        conn.execute("CREATE SCHEMA absurd")
    with pytest.raises(MigrationError, match="not owned by jobs_owner"):
        await migrator(absurd_source()).migrate(fresh_database)


def test_release_numbers() -> None:
    assert release_number("0.5.1") == 5001
    assert release_number("1.12.3") == 1_012_003
    with pytest.raises(MigrationError):
        release_number("main")
