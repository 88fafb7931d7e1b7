"""Change sets through the actions on real PostgreSQL: the lifecycle and its revisions, edits,
validation bound to the digest, reviews and approval, merge races and rebase."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from platformkit.db.scope import tenant_transaction
from strataplane import db
from strataplane.actions import audit, change_sets, history, reviews, spec, teams, validation
from strataplane.actions.change_sets import (
    BaseMoved,
    DigestMismatch,
    DigestRequired,
    FileNotFound,
    InvalidFile,
    InvalidState,
    NotApproved,
    NotAuthor,
    NotValidated,
    RebaseConflict,
)
from strataplane.actions.context import Ctx
from strataplane.domain.merge import three_way
from strataplane.domain.spec.canonical import blob_hash, canonicalize
from strataplane.domain.tree import EMPTY_TREE_HASH, tree_hash
from strataplane.store import objects
from strataplane.store.change_sets import ChangeSet
from strataplane.testing import Seed


def bundle(version: str, owner: str = "platform") -> str:
    return (
        f'owner = "{owner}"\nagentKind = "telegraf"\ndescription = "{version}"\n'
        "[config.inputs.cpu.default]\npercpu = true\n"
    )


OWNERS_POLICY = 'owner = "platform"\n[[rules]]\nname = "owners"\nteams = ["@owners"]\n'


@dataclass
class W:
    seed: Seed
    admin: Ctx
    author: Ctx
    approver: Ctx
    approver2: Ctx

    @property
    def tenant(self) -> Any:
        return self.admin.tenant_id


@pytest.fixture
async def w(sp_seed: Seed) -> W:
    tenant, admin = await sp_seed.tenant("alpha")
    admin_ctx = sp_seed.ctx(admin, tenant.id)
    for slug in ("platform", "web"):
        await teams.create_team(admin_ctx, slug, slug.title())
    people = [await sp_seed.member(admin_ctx, role) for role in ("author", "approver", "approver")]
    ctxs = [sp_seed.ctx(u, tenant.id) for u in people]
    return W(sp_seed, admin_ctx, *ctxs)


async def propose(ctx: Ctx, files: dict[str, str | None], title: str = "change") -> ChangeSet:
    cs = await change_sets.create_change_set(ctx, title)
    for path, content in files.items():
        if content is None:
            cs = (await spec.delete_file(ctx, cs.id, path, seen=cs.digest)).change_set
        else:
            edit = await spec.write_file(ctx, cs.id, path, content.encode(), seen=cs.digest)
            cs = edit.change_set
    return cs


async def validate(w: W, cs: ChangeSet, ctx: Ctx | None = None) -> ChangeSet:
    ctx = ctx or w.author
    op, _ = await validation.request_validation(ctx, cs.id)
    await validation.run_validation(w.seed.services.pool, validation.params_for(op, ctx.principal))
    return await change_sets.access_change_set(ctx, cs.id)


async def ready(w: W, files: dict[str, str | None], title: str = "change") -> ChangeSet:
    """Proposed, validated, submitted and approved; not merged."""
    cs = await validate(w, await propose(w.author, files, title))
    assert cs.validated, cs.validation
    cs = await reviews.submit_change_set(w.author, cs.id, seen=cs.digest)
    cs, _ = await reviews.review_change_set(w.approver, cs.id, "approve", seen=cs.digest)
    return cs


async def land(w: W, files: dict[str, str | None], title: str = "change") -> int:
    cs = await ready(w, files, title)
    merged, revision = await history.merge_change_set(w.author, cs.id, seen=cs.digest)
    assert merged.state == "merged"
    return revision.id


async def test_merges_make_gapless_revisions_with_tree_hashes(w: W) -> None:
    first = await history.access_revision(w.admin, 1)
    assert (first.tree_hash, first.message) == (EMPTY_TREE_HASH, "Initial empty revision")
    messy = "# base bundle\n" + bundle("v1").replace(" = ", "=")
    r2 = await land(w, {"bundles/a.toml": messy, "settings.toml": 'owner = "platform"\n'}, "one")
    r3 = await land(w, {"bundles/a.toml": None, "bundles/b.toml": bundle("v1")}, "two")
    assert (r2, r3) == (2, 3)
    canonical = canonicalize(bundle("v1").encode())
    assert canonical.content == canonicalize(messy.encode()).content  # comments dropped
    _, tree = await history.revision_tree(w.admin, 3)
    assert {e.path: e.blob_hash for e in tree} == {
        "bundles/b.toml": canonical.hash,
        "settings.toml": blob_hash(canonicalize(b'owner = "platform"\n').content),
    }
    revision = await history.access_revision(w.admin, 3)
    assert revision.tree_hash == tree_hash({e.path: e.blob_hash for e in tree})
    assert revision.message == "CS-2: two"
    assert revision.change_set_number == 2
    assert [r.id for r in await history.list_revisions(w.admin)] == [3, 2, 1]
    events = await audit.list_audit_events(w.admin, limit=500)
    actions = [e["action"] for e in events if e["object_kind"] == "change_set"]
    for name in ("create", "edit", "validate", "submit", "approve", "merge"):
        assert f"change_set.{name}" in actions
    assert (await audit.verify_audit(w.admin)).ok


async def test_every_edit_checks_state_digest_author_and_content(w: W) -> None:
    await land(w, {"bundles/a.toml": bundle("v1")})
    cs = await change_sets.create_change_set(w.author, "edit")
    with pytest.raises(DigestRequired):
        await spec.write_file(w.author, cs.id, "bundles/a.toml", b"x", seen=None)
    with pytest.raises(DigestMismatch):
        await spec.write_file(w.author, cs.id, "bundles/a.toml", b"x", seen=b"\0" * 32)
    with pytest.raises(NotAuthor):
        await spec.write_file(w.admin, cs.id, "bundles/a.toml", b"x", seen=cs.digest)
    with pytest.raises(InvalidFile) as bad:
        await spec.write_file(w.author, cs.id, "bundles/a.toml", b"owner = ", seen=cs.digest)
    assert bad.value.data["diagnostics"][0]["code"] == "SP-1003"
    with pytest.raises(InvalidFile) as path:
        await spec.write_file(w.author, cs.id, "nowhere/x.toml", b"", seen=cs.digest)
    assert path.value.data["diagnostics"][0]["code"] == "SP-1001"
    with pytest.raises(FileNotFound):
        await spec.delete_file(w.author, cs.id, "bundles/zz.toml", seen=cs.digest)
    empty = cs.digest
    edit = await spec.write_file(
        w.author, cs.id, "bundles/a.toml", b"# hi\n" + bundle("v2").encode(), seen=empty
    )
    assert [n.code for n in edit.notices] == ["SP-1006"]
    again = await spec.write_file(
        w.author, cs.id, "bundles/a.toml", bundle("v2").encode(), seen=edit.change_set.digest
    )
    assert again.change_set.digest == edit.change_set.digest  # same canonical bytes: no-op
    back = await spec.write_file(
        w.author, cs.id, "bundles/a.toml", bundle("v1").encode(), seen=edit.change_set.digest
    )
    assert back.change_set.digest == empty  # back to the base content: the row is gone
    _, rows = await history.change_set_files(w.author, cs.id)
    assert rows == {}
    closed = await change_sets.close_change_set(w.author, cs.id)
    with pytest.raises(InvalidState):
        await spec.write_file(w.author, cs.id, "bundles/a.toml", b"", seen=closed.digest)


async def test_validation_stores_only_while_the_digest_holds(
    w: W, monkeypatch: pytest.MonkeyPatch
) -> None:
    cs = await propose(
        w.author,
        {
            "layers/web.toml": 'owner = "web"\nagentKind = "telegraf"\n'
            'bundles = [{ name = "nope" }]\n'
        },
    )
    op, created = await validation.request_validation(w.author, cs.id)
    again, created_again = await validation.request_validation(w.author, cs.id)
    assert created
    assert not created_again
    assert again.id == op.id
    check = validation._check

    async def edited_meanwhile(tx: Any, snap: Any) -> Any:
        """A real edit commits while the validation works unlocked."""
        nonlocal cs
        doc = await check(tx, snap)
        edit = await spec.write_file(
            w.author, cs.id, "bundles/nope.toml", bundle("v1").encode(), seen=cs.digest
        )
        cs = edit.change_set
        return doc

    monkeypatch.setattr(validation, "_check", edited_meanwhile)
    result = await validation.run_validation(
        w.seed.services.pool, validation.params_for(op, w.author.principal)
    )
    monkeypatch.undo()
    assert result["stale"] is True
    assert (await change_sets.access_change_set(w.author, cs.id)).validation is None
    finished = await validation.access_operation(w.author, op.id)
    assert (finished.state, finished.progress) == ("succeeded", 1.0)
    cs = (await spec.delete_file(w.author, cs.id, "bundles/nope.toml", seen=cs.digest)).change_set
    cs = await validate(w, cs)
    assert not cs.validated
    assert cs.validation["digest"] == cs.digest.hex()
    found = cs.validation["diagnostics"]
    assert [(d["code"], d["path"]) for d in found if d["severity"] == "error"] == [
        ("SP-4001", "layers/web.toml")
    ]
    assert "SP-5010" in {d["code"] for d in found}  # no agents: nobody's configuration changes
    assert cs.impact["agents"] == 0
    with pytest.raises(NotValidated):
        await reviews.submit_change_set(w.author, cs.id, seen=cs.digest)
    ghosts = bundle("v1", owner="ghosts").encode()
    cs = (
        await spec.write_file(w.author, cs.id, "bundles/nope.toml", ghosts, seen=cs.digest)
    ).change_set
    cs = await validate(w, cs)
    assert {d["code"] for d in cs.validation["diagnostics"] if d["severity"] == "error"} == {
        "SP-2006"
    }


async def test_an_edit_invalidates_validation_and_approvals(w: W) -> None:
    cs = await ready(w, {"bundles/a.toml": bundle("v1")})
    assert cs.requirements["approved"] is True
    edit = await spec.write_file(
        w.author, cs.id, "bundles/a.toml", bundle("v2").encode(), seen=cs.digest
    )
    cs = edit.change_set
    assert cs.state == "draft"
    assert not cs.validated
    assert cs.requirements["approved"] is False
    assert cs.requirements["minimumApprovals"]["approvals"] == []
    with pytest.raises(NotValidated):
        await reviews.submit_change_set(w.author, cs.id, seen=cs.digest)
    cs = await validate(w, cs)
    cs = await reviews.submit_change_set(w.author, cs.id, seen=cs.digest)
    with pytest.raises(NotApproved) as refused:
        await history.merge_change_set(w.author, cs.id, seen=cs.digest)
    assert refused.value.data["requirements"]["minimumApprovals"]["met"] is False
    stored = await change_sets.access_change_set(w.author, cs.id)
    assert stored.state == "in_review"
    assert stored.requirements["approved"] is False


async def test_a_reject_blocks_until_its_reviewer_withdraws_it(w: W) -> None:
    cs = await ready(w, {"bundles/a.toml": bundle("v1")})
    _, rejection = await reviews.review_change_set(
        w.approver2, cs.id, "reject", seen=cs.digest, comment="no"
    )
    with pytest.raises(NotApproved) as refused:
        await history.merge_change_set(w.author, cs.id, seen=cs.digest)
    assert refused.value.data["requirements"]["rejectedBy"] == [str(rejection.reviewer_id)]
    with pytest.raises(reviews.HumanOnly):
        await reviews.review_change_set(
            w.seed.system().in_tenant(w.tenant), cs.id, "approve", seen=cs.digest
        )
    await reviews.review_change_set(w.approver2, cs.id, "comment", seen=cs.digest, comment="ok")
    _, revision = await history.merge_change_set(w.author, cs.id, seen=cs.digest)
    assert revision.id == 2
    listed = await reviews.list_reviews(w.author, cs.id)
    assert [r.decision for r in listed] == ["approve", "reject", "comment"]


async def test_team_requirements_count_members_acting_for_them(w: W, sp_seed: Seed) -> None:
    await land(w, {"policies/approval/owners.toml": OWNERS_POLICY})
    cs = await ready(w, {"bundles/web.toml": bundle("v1", owner="web")})
    team = cs.requirements["teams"]
    assert team == [
        {"team": "web", "count": 1, "rules": ["owners/owners"], "approvals": [], "met": False}
    ]
    web = next(t for t in await teams.list_teams(w.admin) if t.slug == "web")
    assert w.approver2.user_id is not None
    await teams.add_team_member(w.admin, web.id, w.approver2.user_id)
    _, review = await reviews.review_change_set(w.approver2, cs.id, "approve", seen=cs.digest)
    assert review.acting_teams == ["web"]
    _, revision = await history.merge_change_set(w.author, cs.id, seen=cs.digest)
    assert revision.id == 3


async def test_concurrent_merges_on_one_base_exactly_one_wins(w: W) -> None:
    one = await ready(w, {"bundles/a.toml": bundle("v1")}, "one")
    two = await ready(w, {"bundles/b.toml": bundle("v1")}, "two")
    results = await asyncio.gather(
        history.merge_change_set(w.author, one.id, seen=one.digest),
        history.merge_change_set(w.author, two.id, seen=two.digest),
        return_exceptions=True,
    )
    won = [r for r in results if not isinstance(r, BaseException)]
    lost = [r for r in results if isinstance(r, BaseException)]
    assert len(won) == 1, results
    assert len(lost) == 1, results
    assert isinstance(lost[0], BaseMoved), results
    loser = two if won[0][0].id == one.id else one
    assert [r.id for r in await history.list_revisions(w.admin)] == [2, 1]
    current = await change_sets.access_change_set(w.author, loser.id)
    assert current.state == "in_review"  # a failed merge leaves it in review
    rebased = await spec.rebase_change_set(w.author, loser.id, seen=current.digest)
    assert rebased.state == "draft"
    assert rebased.base_revision_id == 2
    rebased = await validate(w, rebased)
    rebased = await reviews.submit_change_set(w.author, rebased.id, seen=rebased.digest)
    await reviews.review_change_set(w.approver, rebased.id, "approve", seen=rebased.digest)
    _, revision = await history.merge_change_set(w.author, rebased.id, seen=rebased.digest)
    assert revision.id == 3
    _, tree = await history.revision_tree(w.admin, 3)
    assert [e.path for e in tree] == ["bundles/a.toml", "bundles/b.toml"]


async def test_rebase_lists_conflicts_and_takes_resolutions(w: W) -> None:
    await land(w, {"bundles/a.toml": bundle("v1"), "bundles/b.toml": bundle("v1")})
    mine = await propose(
        w.author,
        {
            "bundles/a.toml": bundle("mine"),
            "bundles/b.toml": None,
            "bundles/c.toml": bundle("mine"),
        },
    )
    await land(
        w,
        {
            "bundles/a.toml": bundle("theirs"),
            "bundles/b.toml": bundle("theirs"),
            "bundles/c.toml": bundle("mine"),
        },
    )
    with pytest.raises(RebaseConflict) as conflict:
        await spec.rebase_change_set(w.author, mine.id, seen=mine.digest)
    assert [c["path"] for c in conflict.value.data["conflicts"]] == [
        "bundles/a.toml",
        "bundles/b.toml",
    ]
    unchanged = await change_sets.access_change_set(w.author, mine.id)
    assert unchanged.digest == mine.digest
    assert unchanged.base_revision_id == 2
    resolutions: dict[str, str | bytes] = {
        "bundles/a.toml": bundle("both").encode(),
        "bundles/b.toml": "ours",
    }
    rebased = await spec.rebase_change_set(
        w.author, mine.id, seen=mine.digest, resolutions=resolutions
    )
    assert rebased.base_revision_id == 3
    assert rebased.digest != mine.digest
    _, rows = await history.change_set_files(w.author, mine.id)
    assert sorted(rows) == ["bundles/a.toml", "bundles/b.toml"]  # c.toml: same on both sides
    assert rows["bundles/b.toml"].blob_hash is None
    assert rows["bundles/a.toml"].base_hash == canonicalize(bundle("theirs").encode()).hash
    async with tenant_transaction(w.seed.services.pool, db.SCOPE, w.tenant) as conn:
        current = {e.path: e.blob_hash for e in await objects.tree_at(conn, w.tenant, 3)}
    assert rows["bundles/b.toml"].base_hash == current["bundles/b.toml"]


PATHS = [f"bundles/p{i}.toml" for i in range(4)]
versions = st.sampled_from(["v0", "v1", "v2"])
trees = st.dictionaries(st.sampled_from(PATHS), versions, max_size=4)
overlays = st.dictionaries(st.sampled_from(PATHS), st.none() | versions, max_size=4)


def _hashes(tree: dict[str, str]) -> dict[str, bytes]:
    return {p: canonicalize(bundle(v).encode()).hash for p, v in tree.items()}


def _apply(tree: dict[str, str], overlay: dict[str, str | None]) -> dict[str, str]:
    out = dict(tree)
    for path, version in overlay.items():
        if version is None:
            out.pop(path, None)
        else:
            out[path] = version
    return out


async def make_tree(w: W, target: dict[str, str]) -> int:
    """Land whatever makes the latest tree ``target`` (path -> version); the latest revision."""
    _, entries = await history.revision_tree(w.admin)
    current = {e.path: e.blob_hash for e in entries}
    wanted = _hashes(target)
    files: dict[str, str | None] = {p: None for p in current if p not in wanted}
    files |= {p: bundle(target[p]) for p, h in wanted.items() if current.get(p) != h}
    if files:
        await land(w, files)
    return (await history.access_revision(w.admin)).id


@settings(
    max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(base=trees, ours=overlays, theirs=overlays)
async def test_rebase_through_the_store_is_the_three_way_merge(
    w: W, base: dict[str, str], ours: dict[str, str | None], theirs: dict[str, str | None]
) -> None:
    ours = {p: v for p, v in ours.items() if base.get(p) != v}  # no no-op edits
    start = await make_tree(w, base)
    mine = await propose(w.author, {p: bundle(v) if v else None for p, v in ours.items()})
    their_tree = _apply(base, theirs)
    await make_tree(w, their_tree)
    expected = three_way(
        _hashes(base),
        {p: _hashes({p: v})[p] if v else None for p, v in ours.items()},
        _hashes(their_tree),
    )
    try:
        rebased = await spec.rebase_change_set(w.author, mine.id, seen=mine.digest)
        assert expected.clean
    except RebaseConflict as conflict:
        found = [c["path"] for c in conflict.data["conflicts"]]
        assert found == [c.path for c in expected.conflicts]
        choose: dict[str, str | bytes] = dict.fromkeys(found, "ours")
        rebased = await spec.rebase_change_set(
            w.author, mine.id, seen=mine.digest, resolutions=choose
        )
    _, rows = await history.change_set_files(w.author, mine.id)
    if expected.clean:
        assert {p: (r.blob_hash, r.base_hash) for p, r in rows.items()} == {
            p: (r.blob_hash, r.base_hash) for p, r in expected.rows.items()
        }
    if rows:
        rebased = await validate(w, rebased)
        rebased = await reviews.submit_change_set(w.author, mine.id, seen=rebased.digest)
        await reviews.review_change_set(w.approver, mine.id, "approve", seen=rebased.digest)
        await history.merge_change_set(w.author, mine.id, seen=rebased.digest)
    else:  # every change was made upstream too (merging with itself): nothing left
        assert start <= rebased.base_revision_id
    _, entries = await history.revision_tree(w.admin)
    assert {e.path: e.blob_hash for e in entries} == _hashes(_apply(their_tree, ours))


async def test_merging_with_itself_and_disjoint_edits(w: W) -> None:
    await make_tree(w, {"bundles/p0.toml": "v0", "bundles/p1.toml": "v0"})
    same = {"bundles/p0.toml": bundle("v1"), "bundles/p1.toml": None}
    twin = await propose(w.author, same)
    await land(w, same)
    rebased = await spec.rebase_change_set(w.author, twin.id, seen=twin.digest)
    assert (await history.change_set_files(w.author, twin.id))[1] == {}
    assert rebased.base_revision_id == 3
    disjoint = await propose(w.author, {"bundles/p2.toml": bundle("v2")})
    await land(w, {"bundles/p3.toml": bundle("v2")})
    rebased = await spec.rebase_change_set(w.author, disjoint.id, seen=disjoint.digest)
    _, rows = await history.change_set_files(w.author, disjoint.id)
    assert list(rows) == ["bundles/p2.toml"]
    assert rows["bundles/p2.toml"].base_hash is None
