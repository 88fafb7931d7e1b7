"""Three-way merge for rebase, revert and restore (architecture.md §3.8, §3.9)."""

from __future__ import annotations

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from strataplane.domain.merge import (
    Row,
    UnresolvedConflicts,
    rebase,
    resolve,
    restore,
    revert,
    three_way,
)
from strataplane.domain.tree import apply_overlay, diff_trees, normalize_overlay

H = {name: bytes([i]) * 32 for i, name in enumerate("abcdefgh", start=1)}
paths = st.sampled_from(["layers/a.toml", "layers/b.toml", "routes/r.toml", "settings.toml"])
blobs = st.sampled_from(sorted(H.values()))
trees = st.dictionaries(paths, blobs)
overlays = st.dictionaries(paths, st.none() | blobs)
SETTINGS = settings(max_examples=150)


@SETTINGS
@given(trees, overlays)
def test_rebase_onto_the_same_base_is_the_identity(
    base: dict[str, bytes], ours: dict[str, bytes | None]
) -> None:
    result = three_way(base, ours, base)
    assert result.clean
    expected = normalize_overlay(base, ours)
    assert {p: r.blob_hash for p, r in result.rows.items()} == expected
    assert all(r.base_hash == base.get(p) for p, r in result.rows.items())


@SETTINGS
@given(trees, overlays, overlays)
def test_disjoint_edits_merge_cleanly_and_commute(
    base: dict[str, bytes], ours: dict[str, bytes | None], theirs: dict[str, bytes | None]
) -> None:
    theirs = {p: b for p, b in theirs.items() if p not in ours}
    their_tree = apply_overlay(base, theirs)
    our_tree = apply_overlay(base, ours)
    one = rebase(base, ours, their_tree)
    other = rebase(base, theirs, our_tree)
    merged = apply_overlay(their_tree, {p: r.blob_hash for p, r in one.items()})
    assert merged == apply_overlay(our_tree, {p: r.blob_hash for p, r in other.items()})
    assert merged == apply_overlay(apply_overlay(base, ours), theirs)
    assert all(r.base_hash == their_tree.get(p) for p, r in one.items())


@SETTINGS
@given(trees, paths, st.none() | blobs, st.none() | blobs)
def test_the_same_path_changed_differently_is_a_conflict(
    base: dict[str, bytes], path: str, ours: bytes | None, theirs: bytes | None
) -> None:
    b = base.get(path)
    assume(len({b, ours, theirs}) == 3)  # both changed it, differently (incl. deletions)
    their_tree = apply_overlay(base, {path: theirs})
    result = three_way(base, {path: ours}, their_tree)
    assert [(c.path, c.base, c.ours, c.theirs) for c in result.conflicts] == [
        (path, b, ours, theirs)
    ]
    assert result.rows == {}


@SETTINGS
@given(trees, overlays)
def test_the_same_change_on_both_sides_drops_the_row(
    base: dict[str, bytes], ours: dict[str, bytes | None]
) -> None:
    result = three_way(base, ours, apply_overlay(base, ours))
    assert result.clean
    assert result.rows == {}


def test_conflict_kinds_and_resolutions() -> None:
    a, b, c = H["a"], H["b"], H["c"]
    base = {"layers/x.toml": a, "layers/y.toml": a, "layers/keep.toml": a}
    ours = {"layers/x.toml": b, "layers/y.toml": None, "layers/new.toml": b, "layers/keep.toml": c}
    theirs = {  # x deleted there
        "layers/y.toml": c,
        "layers/new.toml": c,
        "layers/keep.toml": a,
    }
    result = three_way(base, ours, theirs)
    assert [c.path for c in result.conflicts] == [
        "layers/new.toml",
        "layers/x.toml",
        "layers/y.toml",
    ]
    assert result.rows == {"layers/keep.toml": Row(c, a)}
    assert result.conflicts[1].to_json() == {
        "path": "layers/x.toml",
        "base": a.hex(),
        "ours": b.hex(),
        "theirs": None,
    }
    with pytest.raises(UnresolvedConflicts) as info:
        rebase(base, ours, theirs, {"layers/x.toml": "ours"})
    assert [c.path for c in info.value.conflicts] == ["layers/new.toml", "layers/y.toml"]
    with pytest.raises(ValueError, match="without a conflict"):
        resolve(result, {"layers/keep.toml": "ours"})
    rows = rebase(
        base,
        ours,
        theirs,
        {"layers/x.toml": "ours", "layers/y.toml": "theirs", "layers/new.toml": c},
    )
    # "ours" keeps the overlay content on the new base; new content equal to theirs is a no-op
    assert rows == {"layers/keep.toml": Row(c, a), "layers/x.toml": Row(b, None)}


def test_revert_undoes_a_revision_and_conflicts_with_later_changes() -> None:
    a, b, c = H["a"], H["b"], H["c"]
    r1 = {"layers/x.toml": a, "layers/y.toml": a}
    r2 = {"layers/x.toml": b, "layers/z.toml": a}  # changed x, deleted y, added z
    latest = {**r2, "routes/q.toml": c}
    result = revert(r1, r2, latest)
    assert result.clean
    assert {p: r.blob_hash for p, r in result.rows.items()} == {
        "layers/x.toml": a,
        "layers/y.toml": a,
        "layers/z.toml": None,
    }
    assert apply_overlay(latest, {p: r.blob_hash for p, r in result.rows.items()}) == {
        **r1,
        "routes/q.toml": c,
    }
    later = {**latest, "layers/x.toml": c}
    assert [c.path for c in revert(r1, r2, later).conflicts] == ["layers/x.toml"]


@SETTINGS
@given(trees, trees)
def test_restore_recreates_the_tree(target: dict[str, bytes], latest: dict[str, bytes]) -> None:
    rows = restore(target, latest)
    assert apply_overlay(latest, {p: r.blob_hash for p, r in rows.items()}) == target
    assert all(r.base_hash == latest.get(p) for p, r in rows.items())
    one = sorted(diff_trees(latest, target))[:1]
    assert set(restore(target, latest, one)) == set(one)
