"""The migrator: ordered, checksummed, locked, and run as the owner role."""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import Callable
from pathlib import Path

import psycopg
import pytest
from platformkit.db.migrator import MigrationError, Migrator, load_directory

HERE = Path(__file__).parent / "db_migrations"
MakeMigrator = Callable[..., Migrator]


async def test_applies_in_order_once_and_records_checksums(
    fresh_database: str, make_kit_migrator: MakeMigrator
) -> None:
    m = make_kit_migrator(HERE)
    assert await m.pending(fresh_database) == ["kit:0001_notes", "kit:0002_note_tags"]
    assert await m.migrate(fresh_database) == ["kit:0001_notes", "kit:0002_note_tags"]
    assert await m.migrate(fresh_database) == []
    with psycopg.connect(fresh_database) as conn:
        rows = conn.execute(
            "SELECT component, version, name, length(checksum) FROM schema_migrations"
            " ORDER BY version"
        ).fetchall()
        owner = conn.execute(
            "SELECT tableowner FROM pg_tables WHERE tablename = 'notes'"
        ).fetchone()
    assert rows == [("kit", 1, "notes", 64), ("kit", 2, "note_tags", 64)]
    assert owner == ("kit_owner",)


async def test_edited_applied_file_is_an_error(
    fresh_database: str, tmp_path: Path, make_kit_migrator: MakeMigrator
) -> None:
    copy = tmp_path / "m"
    shutil.copytree(HERE, copy)
    await make_kit_migrator(copy).migrate(fresh_database)
    (copy / "0001_notes.sql").write_text((copy / "0001_notes.sql").read_text() + "\n-- edit\n")
    with pytest.raises(MigrationError, match="edited after it was applied"):
        await make_kit_migrator(copy).migrate(fresh_database)


async def test_file_missing_for_applied_version_is_an_error(
    fresh_database: str, tmp_path: Path, make_kit_migrator: MakeMigrator
) -> None:
    copy = tmp_path / "m"
    shutil.copytree(HERE, copy)
    await make_kit_migrator(copy).migrate(fresh_database)
    (copy / "0002_note_tags.sql").unlink()
    with pytest.raises(MigrationError, match="older than the database"):
        await make_kit_migrator(copy).migrate(fresh_database)


async def test_failed_migration_rolls_back_and_is_not_recorded(
    fresh_database: str, tmp_path: Path, make_kit_migrator: MakeMigrator
) -> None:
    copy = tmp_path / "m"
    shutil.copytree(HERE, copy)
    (copy / "0003_broken.sql").write_text("CREATE TABLE half (id int);\nSELECT * FROM nowhere;\n")
    with pytest.raises(MigrationError, match="0003_broken failed"):
        await make_kit_migrator(copy).migrate(fresh_database)
    with psycopg.connect(fresh_database) as conn:
        assert conn.execute("SELECT to_regclass('half')").fetchone() == (None,)
        assert conn.execute("SELECT max(version) FROM schema_migrations").fetchone() == (2,)


def test_bad_file_names_are_refused(tmp_path: Path) -> None:
    (tmp_path / "1_x.sql").write_text("")
    with pytest.raises(MigrationError, match="NNNN_lower_name"):
        load_directory("kit", tmp_path)


async def test_two_migrators_at_once_one_applies_the_other_finds_nothing(
    fresh_database: str, tmp_path: Path, make_kit_migrator: MakeMigrator
) -> None:
    copy = tmp_path / "m"
    shutil.copytree(HERE, copy)
    # A slow migration keeps the lock long enough for the second migrator to queue behind it.
    (copy / "0003_slow.sql").write_text("SELECT pg_sleep(1);\n")
    results = await asyncio.gather(
        make_kit_migrator(copy).migrate(fresh_database),
        make_kit_migrator(copy).migrate(fresh_database),
    )
    assert sorted(map(len, results)) == [0, 3]
