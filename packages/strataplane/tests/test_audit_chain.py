"""The audit chains: every action appends to its tenant's chain (or the platform chain), and
verification names the first row broken by editing, deleting, reordering or inserting rows
directly in SQL."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from typing import Any

import psycopg
import pytest
from platformkit.audit import GENESIS, chain_hash
from psycopg import sql as psql
from psycopg.rows import dict_row
from strataplane.actions import audit, teams
from strataplane.actions.admin import verify_chains
from strataplane.cli import app
from strataplane.store.audit import event_of
from strataplane.testing import Seed
from typer.testing import CliRunner


def sql(url: str, query: str, *args: Any) -> list[tuple[Any, ...]]:
    with psycopg.connect(url, options="-c search_path=strataplane") as conn:
        cur = conn.execute(query, args or None)
        return cur.fetchall() if cur.description else []


@pytest.fixture
async def chain(sp_seed: Seed) -> uuid.UUID:
    """A tenant with six events: tenant.create, member.add, role_binding.create, 3 x team."""
    tenant, admin = await sp_seed.tenant("acme")
    ctx = sp_seed.ctx(admin, tenant.id)
    team = await teams.create_team(ctx, "sre", "SRE")
    await teams.update_team(ctx, team.id, display_name="Site reliability")
    await teams.delete_team(ctx, team.id)
    return tenant.id


async def _tenant_check(url: str, tenant_id: uuid.UUID) -> audit.ChainCheck:
    (check,) = await verify_chains(url, str(tenant_id), False)
    return check


async def test_actions_append_with_authz_details(
    chain: uuid.UUID, sp_seed: Seed, strataplane_database: str
) -> None:
    rows = sql(
        strataplane_database,
        "SELECT seq, action, actor_kind, details FROM audit_event WHERE tenant_id = %s "
        "ORDER BY seq",
        chain,
    )
    assert [r[:2] for r in rows] == [
        (1, "tenant.create"), (2, "member.add"), (3, "role_binding.create"),
        (4, "team.create"), (5, "team.update"), (6, "team.delete"),
    ]  # fmt: skip
    assert rows[0][2] == "system"
    authz = rows[3][3]["authz"]
    assert authz["package"]
    assert len(authz["bindings"]) == 1
    first = sql(strataplane_database, "SELECT prev_hash FROM audit_event WHERE seq = 1")
    assert first == [(GENESIS,)]
    check = await _tenant_check(strataplane_database, chain)
    assert (check.ok, check.checked) == (True, 6)


async def test_stored_hash_is_the_documented_one(
    chain: uuid.UUID, strataplane_database: str
) -> None:
    with _dict_conn(strataplane_database) as conn:
        rows = conn.execute("SELECT * FROM audit_event ORDER BY seq").fetchall()
    for row in rows:
        assert row["hash"] == chain_hash(row["prev_hash"], event_of(row))
    assert event_of(rows[0])["ts"].endswith("Z")
    assert len(event_of(rows[0])["ts"]) == len("2026-01-01T00:00:00.000000Z")


Tamper = Callable[[str, uuid.UUID], None]


def _edit(url: str, t: uuid.UUID) -> None:
    sql(url, "UPDATE audit_event SET details = '{\"x\": 1}' WHERE tenant_id = %s AND seq = 3", t)


def _delete_middle(url: str, t: uuid.UUID) -> None:
    sql(url, "DELETE FROM audit_event WHERE tenant_id = %s AND seq = 3", t)


def _delete_tail(url: str, t: uuid.UUID) -> None:
    sql(url, "DELETE FROM audit_event WHERE tenant_id = %s AND seq = 6", t)


def _reorder(url: str, t: uuid.UUID) -> None:
    for old, new in ((3, -3), (4, 3), (-3, 4)):
        sql(url, "UPDATE audit_event SET seq = %s WHERE tenant_id = %s AND seq = %s", new, t, old)


def _dict_conn(url: str) -> psycopg.Connection[dict[str, Any]]:
    return psycopg.connect(url, options="-c search_path=strataplane", row_factory=dict_row)


def _insert(conn: psycopg.Connection[dict[str, Any]], row: dict[str, Any]) -> None:
    columns = [c for c in row if c != "details"]
    conn.execute(
        psql.SQL("INSERT INTO audit_event ({}, details) VALUES ({}, %(details_json)s)").format(
            psql.SQL(", ").join(map(psql.Identifier, columns)),
            psql.SQL(", ").join(psql.Placeholder(c) for c in columns),
        ),
        {**row, "details_json": psycopg.types.json.Jsonb(row["details"])},
    )


def _insert_forged(url: str, t: uuid.UUID) -> None:
    """A well-formed row spliced in at seq 4: its own hash is right, the next link is not."""
    sql(url, "UPDATE audit_event SET seq = seq + 100 WHERE tenant_id = %s AND seq >= 4", t)
    sql(url, "UPDATE audit_event SET seq = seq - 99 WHERE tenant_id = %s AND seq >= 104", t)
    (prev,) = sql(url, "SELECT hash FROM audit_event WHERE tenant_id = %s AND seq = 3", t)
    with _dict_conn(url) as conn:
        row = conn.execute(
            "SELECT * FROM audit_event WHERE tenant_id = %s AND seq = 5", (t,)
        ).fetchone()
        assert row is not None
        row.update(seq=4, action="team.forged", prev_hash=prev[0])
        row["hash"] = chain_hash(prev[0], event_of(row))
        _insert(conn, row)


def _append_forged(url: str, t: uuid.UUID) -> None:
    """A correctly chained row after the last one, which the counter never issued."""
    with _dict_conn(url) as conn:
        row = conn.execute("SELECT * FROM audit_event WHERE seq = 6 AND tenant_id = %s", (t,))
        last = row.fetchone()
        assert last is not None
        forged = {**last, "seq": 7, "prev_hash": last["hash"]}
        forged["hash"] = chain_hash(last["hash"], event_of(forged))
        _insert(conn, forged)


@pytest.mark.parametrize(
    ("tamper", "bad_row", "reason"),
    [
        (_edit, 3, "hash_mismatch"),
        (_delete_middle, 4, "seq_gap"),
        (_delete_tail, 6, "truncated"),
        (_reorder, 3, "prev_link_broken"),
        (_insert_forged, 5, "prev_link_broken"),
        (_append_forged, 7, "beyond_counter"),
    ],
)
async def test_tampering_is_named(
    chain: uuid.UUID, strataplane_database: str, tamper: Tamper, bad_row: int, reason: str
) -> None:
    tamper(strataplane_database, chain)
    check = await _tenant_check(strataplane_database, chain)
    assert (check.ok, check.bad_row, check.reason) == (False, bad_row, reason)


@pytest.mark.parametrize(
    ("statement", "reason"),
    [
        ("UPDATE platform_audit_event SET action = 'x' WHERE id = {second}", "hash_mismatch"),
        ("DELETE FROM platform_audit_event WHERE id = {second}", "prev_link_broken"),
        (
            "UPDATE platform_audit_event SET id = -1 WHERE id = {second}; "
            "UPDATE platform_audit_event SET id = {second} WHERE id = {third}; "
            "UPDATE platform_audit_event SET id = {third} WHERE id = -1",
            "prev_link_broken",
        ),
    ],
)
async def test_platform_chain_tampering(
    chain: uuid.UUID, sp_seed: Seed, strataplane_database: str, statement: str, reason: str
) -> None:
    for name in ("extra1", "extra2"):  # more platform events (user.create)
        await sp_seed.user(name)
    ids = [
        r[0] for r in sql(strataplane_database, "SELECT id FROM platform_audit_event ORDER BY id")
    ]
    assert len(ids) >= 4
    (clean,) = await verify_chains(strataplane_database, None, True)
    assert clean.ok
    sql(strataplane_database, statement.format(second=ids[1], third=ids[2]))
    (check,) = await verify_chains(strataplane_database, None, True)
    assert (check.ok, check.reason) == (False, reason)
    assert check.bad_row in ids[1:4]


async def test_cli_names_the_first_bad_row(chain: uuid.UUID, strataplane_database: str) -> None:
    runner = CliRunner()
    args = ["audit", "verify", "--database-url", strataplane_database]
    ok = await asyncio.to_thread(runner.invoke, app, args)
    assert ok.exit_code == 0, ok.output
    assert "ok strataplane/platform" in ok.output
    _edit(strataplane_database, chain)
    broken = await asyncio.to_thread(runner.invoke, app, [*args, "--tenant", "acme"])
    assert broken.exit_code == 1
    assert f"broken strataplane/tenant/{chain} at seq 3: hash_mismatch" in broken.output


async def test_verify_through_the_tenant_needs_audit_read(chain: uuid.UUID, sp_seed: Seed) -> None:
    from strataplane import errors

    (admin_id,) = [r[0] for r in sql(
        sp_seed.services.settings.database_url.get_secret_value(),  # type: ignore[union-attr]
        "SELECT user_id FROM tenant_member WHERE tenant_id = %s", chain,
    )]  # fmt: skip
    admin = await _user(sp_seed, admin_id)
    assert (await audit.verify_audit(sp_seed.ctx(admin, chain))).ok
    viewer = await sp_seed.member(sp_seed.ctx(admin, chain), "viewer")
    with pytest.raises(errors.PermissionDenied):
        await audit.verify_audit(sp_seed.ctx(viewer, chain))


async def _user(seed: Seed, user_id: uuid.UUID) -> Any:
    from strataplane.actions.users import access_user

    return await access_user(seed.system(), user_id)
