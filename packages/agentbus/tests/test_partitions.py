"""Monthly messages partitions: 3 months ahead after migrate, idempotent, UTC month bounds,
callable by the gateway role, from the CLI and from the daily leader loop."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta, timezone

import psycopg
import pytest
from agentbus.cli import app as cli
from agentbus.controllers.partitions import ensure_partitions, existing_partitions, partitions_loop
from platformkit.db.scope import Pool, transaction
from typer.testing import CliRunner


def month_names(start: datetime, count: int) -> list[str]:
    year, month = start.year, start.month
    names = []
    for _ in range(count):
        names.append(f"messages_{year:04d}_{month:02d}")
        year, month = (year + 1, 1) if month == 12 else (year, month + 1)
    return names


def bounds(url: str, name: str) -> str:
    with psycopg.connect(url) as conn:
        conn.execute("SET TIME ZONE 'UTC'")  # bounds are rendered in the session's zone
        row = conn.execute(
            "SELECT pg_get_expr(relpartbound, oid) FROM pg_class WHERE relname = %s", (name,)
        ).fetchone()
    assert row is not None
    return str(row[0])


def test_migrate_creates_this_month_and_three_ahead(agentbus_shared_db: str) -> None:
    now = datetime.now(UTC)
    with psycopg.connect(agentbus_shared_db) as conn:
        found = [
            r[0]
            for r in conn.execute(
                "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid"
                " WHERE i.inhparent = 'messages'::regclass ORDER BY 1"
            ).fetchall()
        ]
    assert set(month_names(now, 4)) <= set(found)
    first = month_names(now, 1)[0]
    start = now.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    assert bounds(agentbus_shared_db, first).startswith(
        f"FOR VALUES FROM ('{start:%Y-%m-%d} 00:00:00+00')"
    )


async def test_ensure_is_idempotent_and_runs_as_the_app_role(agentbus_app_pool: Pool) -> None:
    start = datetime(2030, 1, 15, tzinfo=UTC)
    async with transaction(agentbus_app_pool) as conn:
        assert await ensure_partitions(conn, from_time=start) == month_names(start, 4)
        assert await ensure_partitions(conn, from_time=start) == []
        assert await ensure_partitions(conn, months_ahead=5, from_time=start) == [
            "messages_2030_05",
            "messages_2030_06",
        ]
        assert set(month_names(start, 6)) <= set(await existing_partitions(conn))
        owner = await (
            await conn.execute(
                "SELECT tableowner FROM pg_tables WHERE tablename = 'messages_2030_06'"
            )
        ).fetchone()
    assert owner == {"tableowner": "agentbus_owner"}


async def test_month_is_taken_in_utc(agentbus_app_pool: Pool, agentbus_db: str) -> None:
    # 23:30 on 31 January in UTC-5 is already February in UTC.
    start = datetime(2031, 1, 31, 23, 30, tzinfo=timezone(timedelta(hours=-5)))
    async with transaction(agentbus_app_pool) as conn:
        created = await ensure_partitions(conn, months_ahead=0, from_time=start)
    assert created == ["messages_2031_02"]
    assert bounds(agentbus_db, "messages_2031_02") == (
        "FOR VALUES FROM ('2031-02-01 00:00:00+00') TO ('2031-03-01 00:00:00+00')"
    )


async def test_months_ahead_is_bounded(agentbus_app_pool: Pool) -> None:
    with pytest.raises(psycopg.errors.RaiseException, match="between 0 and 36"):
        async with transaction(agentbus_app_pool) as conn:
            await ensure_partitions(conn, months_ahead=37)


def test_cli_partitions_ensure(agentbus_db: str) -> None:
    runner = CliRunner()
    args = ["partitions", "ensure", "--database-url", agentbus_db, "--months-ahead", "5"]
    first = runner.invoke(cli, args)
    assert first.exit_code == 0, first.output
    ahead = month_names(datetime.now(UTC), 6)
    assert f"created {ahead[4]}" in first.output
    assert f"created {ahead[5]}" in first.output
    again = runner.invoke(cli, args)
    assert again.exit_code == 0, again.output
    assert "created" not in again.output
    assert "partitions ready" in again.output


async def test_leader_loop_runs_the_job(agentbus_app_pool: Pool) -> None:
    target = month_names(datetime.now(UTC), 8)[-1]
    async with partitions_loop(agentbus_app_pool, months_ahead=7, interval=3600):
        for _ in range(100):
            async with transaction(agentbus_app_pool) as conn:
                if target in await existing_partitions(conn):
                    break
            await asyncio.sleep(0.05)
    async with transaction(agentbus_app_pool) as conn:
        assert target in await existing_partitions(conn)
