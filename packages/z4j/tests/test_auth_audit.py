"""The audit chain: every mutation appends a linked row; verification names the first bad one."""

from __future__ import annotations

import asyncio
import itertools

import psycopg
import pytest
from typer.testing import CliRunner
from z4j.actions.audit import verify_database
from z4j.brain import Brain
from z4j.cli import app as cli_app
from z4j.settings import Settings

from .conftest import Seed


async def _seed_chain(seed: Seed) -> None:
    admin = await seed.user("root@example.com", is_admin=True)
    project = await seed.project(admin, "alpha")
    created = await seed.agent(admin, project)
    async with seed.signed_in("root@example.com") as http:
        response = await http.delete(f"/api/v1/projects/{project}/agents/{created.agent['id']}")
        assert response.status_code == 204


def _rows(url: str) -> list[tuple[object, ...]]:
    with psycopg.connect(url) as conn:
        return conn.execute(
            "SELECT id, action, row_hmac, prev_row_hmac FROM audit_log ORDER BY id"
        ).fetchall()


async def test_mutations_append_a_linked_chain(seed: Seed, brain: Brain, z4j_database: str) -> None:
    await _seed_chain(seed)
    rows = _rows(z4j_database)
    assert [r[1] for r in rows] == ["project.create", "agent.create", "auth.login", "agent.delete"]
    assert rows[0][3] is None
    for before, after in itertools.pairwise(rows):
        assert after[3] == before[2]
    result = await verify_database(z4j_database, brain.secrets.audit_key)
    assert result.ok
    assert result.checked == 4


async def test_an_edited_row_is_named(seed: Seed, brain: Brain, z4j_database: str) -> None:
    await _seed_chain(seed)
    with psycopg.connect(z4j_database) as conn:
        target = conn.execute(
            'UPDATE audit_log SET details = \'{"name": "other"}\' '
            "WHERE action = 'agent.create' RETURNING id"
        ).fetchone()
    result = await verify_database(z4j_database, brain.secrets.audit_key)
    assert target is not None
    assert not result.ok
    assert result.bad_id == target[0]
    assert result.reason == "hash_mismatch"
    assert result.checked == 1


async def test_a_deleted_row_breaks_the_next_link(
    seed: Seed, brain: Brain, z4j_database: str
) -> None:
    await _seed_chain(seed)
    rows = _rows(z4j_database)
    with psycopg.connect(z4j_database) as conn:
        conn.execute("DELETE FROM audit_log WHERE id = %s", (rows[1][0],))
    result = await verify_database(z4j_database, brain.secrets.audit_key)
    assert not result.ok
    assert result.bad_id == rows[2][0]
    assert result.reason == "prev_link_broken"


async def test_another_key_verifies_nothing(seed: Seed, z4j_database: str) -> None:
    await _seed_chain(seed)
    result = await verify_database(z4j_database, b"k" * 32)
    assert not result.ok
    assert result.checked == 0


async def test_concurrent_appends_stay_one_chain(
    seed: Seed, brain: Brain, z4j_database: str
) -> None:
    admin = await seed.user("root@example.com", is_admin=True)
    await asyncio.gather(*(seed.project(admin, f"p{i}") for i in range(25)))
    result = await verify_database(z4j_database, brain.secrets.audit_key)
    assert result.ok
    assert result.checked == 25


async def test_the_application_role_cannot_rewrite_history(seed: Seed, brain: Brain) -> None:
    await _seed_chain(seed)
    for statement in ("UPDATE audit_log SET action = 'x'", "DELETE FROM audit_log"):
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            async with brain.platform_tx() as conn:
                await conn.execute(statement)


@pytest.fixture
async def chain(seed: Seed) -> None:
    await _seed_chain(seed)


@pytest.mark.usefixtures("chain")
def test_cli_verify_reports_and_fails_on_a_bad_row(
    z4j_settings: Settings, z4j_database: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("Z4J_CONFIG_DIR", str(z4j_settings.config_dir))
    runner = CliRunner()
    ok = runner.invoke(cli_app, ["audit", "verify", "--database-url", z4j_database])
    assert ok.exit_code == 0, ok.output
    assert "audit log intact" in ok.output
    assert "4 rows" in ok.output
    with psycopg.connect(z4j_database) as conn:
        bad = conn.execute(
            "UPDATE audit_log SET action = 'agent.renamed' WHERE action = 'auth.login' RETURNING id"
        ).fetchone()
    assert bad is not None
    broken = runner.invoke(cli_app, ["audit", "verify", "--database-url", z4j_database])
    assert broken.exit_code == 1
    assert str(bad[0]) in broken.output
    assert "hash_mismatch" in broken.output
