"""The spec's history on real PostgreSQL: the tree at any revision in one range query, the log
of a path, diffs between any two revisions, revert and restore as ordinary change sets, and
tenant isolation of the store."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from uuid import UUID

import pytest
from platformkit.db.scope import tenant_transaction
from strataplane import db
from strataplane.actions import change_sets, history, reviews, spec, teams, validation
from strataplane.actions.change_sets import RebaseConflict, RevisionNotFound
from strataplane.actions.context import Ctx
from strataplane.domain.spec.canonical import canonicalize
from strataplane.store import objects, revisions
from strataplane.store.change_sets import ChangeSet
from strataplane.testing import Seed


def bundle(version: str) -> str:
    return (
        f'owner = "platform"\nagentKind = "telegraf"\ndescription = "{version}"\n'
        "[config.inputs.cpu.default]\npercpu = true\n"
    )


def h(version: str) -> bytes:
    return canonicalize(bundle(version).encode()).hash


@dataclass
class W:
    seed: Seed
    admin: Ctx
    author: Ctx
    approver: Ctx

    @property
    def tenant(self) -> UUID:
        assert self.admin.tenant_id is not None
        return self.admin.tenant_id


async def _world(seed: Seed, slug: str) -> W:
    tenant, admin = await seed.tenant(slug)
    admin_ctx = seed.ctx(admin, tenant.id)
    await teams.create_team(admin_ctx, "platform", "Platform")
    author = await seed.member(admin_ctx, "author")
    approver = await seed.member(admin_ctx, "approver")
    return W(seed, admin_ctx, seed.ctx(author, tenant.id), seed.ctx(approver, tenant.id))


async def land_cs(w: W, cs: ChangeSet) -> int:
    op, _ = await validation.request_validation(w.author, cs.id)
    await validation.run_validation(
        w.seed.services.pool, validation.params_for(op, w.author.principal)
    )
    cs = await change_sets.access_change_set(w.author, cs.id)
    cs = await reviews.submit_change_set(w.author, cs.id, seen=cs.digest)
    await reviews.review_change_set(w.approver, cs.id, "approve", seen=cs.digest)
    return (await history.merge_change_set(w.author, cs.id, seen=cs.digest))[1].id


async def land(w: W, files: dict[str, str | None]) -> int:
    cs = await change_sets.create_change_set(w.author, "change")
    for path, version in files.items():
        if version is None:
            edit = await spec.delete_file(w.author, cs.id, path, seen=cs.digest)
        else:
            edit = await spec.write_file(
                w.author, cs.id, path, bundle(version).encode(), seen=cs.digest
            )
        cs = edit.change_set
    return await land_cs(w, cs)


@pytest.fixture
async def w(sp_seed: Seed) -> W:
    """r2: a=v1 b=v1; r3: a=v2; r4: b deleted, c=v1; r5: a=v3."""
    world = await _world(sp_seed, "alpha")
    await land(world, {"bundles/a.toml": "v1", "bundles/b.toml": "v1"})
    await land(world, {"bundles/a.toml": "v2"})
    await land(world, {"bundles/b.toml": None, "bundles/c.toml": "v1"})
    await land(world, {"bundles/a.toml": "v3"})
    return world


class Counting:
    """A connection that counts the statements run through it."""

    def __init__(self, conn: Any) -> None:
        self.conn, self.statements = conn, 0

    async def execute(self, *args: Any, **kwargs: Any) -> Any:
        self.statements += 1
        return await self.conn.execute(*args, **kwargs)


async def test_the_tree_at_any_revision_is_one_range_query(w: W) -> None:
    expected = {
        1: {},
        2: {"bundles/a.toml": h("v1"), "bundles/b.toml": h("v1")},
        3: {"bundles/a.toml": h("v2"), "bundles/b.toml": h("v1")},
        4: {"bundles/a.toml": h("v2"), "bundles/c.toml": h("v1")},
        5: {"bundles/a.toml": h("v3"), "bundles/c.toml": h("v1")},
    }
    async with tenant_transaction(w.seed.services.pool, db.SCOPE, w.tenant) as conn:
        for n, tree in expected.items():
            counting = Counting(conn)
            found = await objects.tree_at(counting, w.tenant, n)  # type: ignore[arg-type]
            assert counting.statements == 1
            assert {e.path: e.blob_hash for e in found} == tree
        cur = await conn.execute(
            "EXPLAIN (FORMAT JSON) " + objects.TREE_AT, {"t": w.tenant, "n": 3}
        )
        plan = (await cur.fetchone())["QUERY PLAN"][0]["Plan"]
    relations = set()

    def walk(node: dict[str, Any]) -> None:
        if "Relation Name" in node:
            relations.add(node["Relation Name"])
        for child in node.get("Plans", []):
            walk(child)

    walk(plan)
    assert relations == {"spec_object"}  # one table, no per-revision copies or joins


async def test_log_of_a_path_and_diffs_between_any_two_revisions(w: W) -> None:
    log = await history.path_log(w.admin, "bundles/a.toml")
    assert [(v.valid_from, v.valid_to, v.blob_hash) for v in log] == [
        (5, None, h("v3")),
        (3, 5, h("v2")),
        (2, 3, h("v1")),
    ]
    assert [v.change_set for v in log] == [4, 2, 1]
    gone = await history.path_log(w.admin, "bundles/b.toml")
    assert [(v.valid_from, v.valid_to) for v in gone] == [(2, 4)]  # deleted at r4
    forward = await history.diff_revisions(w.admin, 2, 5)
    assert [(d.path, d.old_hash, d.new_hash) for d in forward] == [
        ("bundles/a.toml", h("v1"), h("v3")),
        ("bundles/b.toml", h("v1"), None),
        ("bundles/c.toml", None, h("v1")),
    ]
    assert '-description = "v1"' in forward[0].diff
    assert '+description = "v3"' in forward[0].diff
    backward = await history.diff_revisions(w.admin, 5, 2)
    assert [(d.path, d.old_hash, d.new_hash) for d in backward] == [
        (d.path, d.new_hash, d.old_hash) for d in forward
    ]
    assert await history.diff_revisions(w.admin, 3, 3) == []
    with pytest.raises(RevisionNotFound):
        await history.diff_revisions(w.admin, 1, 9)
    n, blob, content = await history.revision_file(w.admin, "bundles/b.toml", 3)
    assert (n, blob) == (3, h("v1"))
    assert content == canonicalize(bundle("v1").encode()).content


async def test_revert_and_restore_are_ordinary_change_sets(w: W) -> None:
    revert = await spec.revert_revision(w.author, 4)  # brings b back, removes c
    assert revert.title.startswith("Revert r4: CS-3")
    assert revert.reverts_revision_id == 4
    assert revert.state == "draft"
    assert revert.base_revision_id == 5
    _, rows = await history.change_set_files(w.author, revert.id)
    assert {p: r.blob_hash for p, r in rows.items()} == {
        "bundles/b.toml": h("v1"),
        "bundles/c.toml": None,
    }
    with pytest.raises(RebaseConflict) as conflict:  # a changed again at r5
        await spec.revert_revision(w.author, 3)
    assert [c["path"] for c in conflict.value.data["conflicts"]] == ["bundles/a.toml"]
    resolved = await spec.revert_revision(w.author, 3, resolutions={"bundles/a.toml": "ours"})
    _, rows = await history.change_set_files(w.author, resolved.id)
    assert {p: r.blob_hash for p, r in rows.items()} == {"bundles/a.toml": h("v1")}
    restore = await spec.restore_revision(w.author, 2)
    assert restore.title == "Restore r2"
    assert restore.reverts_revision_id is None
    number = await land_cs(w, restore)
    assert number == 6
    same = {r.id: r.tree_hash for r in await history.list_revisions(w.admin)}
    assert same[6] == same[2]  # tree hashes repeat after a restore
    partial = await spec.restore_revision(w.author, 4, paths=["bundles/c.toml"])
    _, rows = await history.change_set_files(w.author, partial.id)
    assert list(rows) == ["bundles/c.toml"]


async def test_the_store_never_shows_another_tenants_spec(w: W, sp_seed: Seed) -> None:
    other = await _world(sp_seed, "beta")
    cs = await change_sets.create_change_set(other.author, "theirs")
    pool = w.seed.services.pool
    async with tenant_transaction(pool, db.SCOPE, w.tenant) as conn:
        assert await revisions.latest_id(conn, other.tenant) == 0
        assert await objects.tree_at(conn, other.tenant, 1) == []
        assert await revisions.get_revision(conn, other.tenant, 1) is None
        # Even naming the tenant explicitly finds nothing outside the transaction's scope.
        cur = await conn.execute("SELECT count(*) AS n FROM change_set WHERE id = %s", (cs.id,))
        assert (await cur.fetchone())["n"] == 0
    with pytest.raises(change_sets.ChangeSetNotFound):
        await change_sets.access_change_set(w.author, cs.id)
    mine = await change_sets.access_change_set(w.author, cs.number)  # numbers are per tenant
    assert mine.id != cs.id
    assert mine.tenant_id == w.tenant
    assert [r.id for r in await history.list_revisions(other.admin)] == [1]
