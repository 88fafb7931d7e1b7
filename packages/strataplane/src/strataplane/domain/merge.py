"""Three-way merge per file, and revert and restore expressed as overlays (architecture.md
§3.8, §3.9).

There is no merging inside a file: for each overlay row, with ``b`` the ancestor's blob, ``o``
ours and ``t`` theirs (None = absent), ``t == o`` drops the row, ``t == b`` keeps it on the new
base, and anything else is a conflict. Paths the overlay does not touch take theirs.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Literal

from strataplane.domain.tree import Overlay, Tree, diff_trees

__all__ = [
    "Conflict",
    "MergeResult",
    "Resolution",
    "Row",
    "UnresolvedConflicts",
    "rebase",
    "resolve",
    "restore",
    "revert",
    "three_way",
]

type Resolution = Literal["ours", "theirs"] | bytes  # bytes: the blob hash of new content


@dataclass(frozen=True, slots=True)
class Row:
    """A ``change_set_file`` row: the new blob (None = deletion) and the blob at the base."""

    blob_hash: bytes | None
    base_hash: bytes | None


@dataclass(frozen=True, slots=True)
class Conflict:
    path: str
    base: bytes | None
    ours: bytes | None
    theirs: bytes | None

    def to_json(self) -> dict[str, str | None]:
        """An element of ``data.conflicts`` of ``change_set.rebase_conflict``."""

        def hexed(h: bytes | None) -> str | None:
            return None if h is None else h.hex()

        return {
            "path": self.path,
            "base": hexed(self.base),
            "ours": hexed(self.ours),
            "theirs": hexed(self.theirs),
        }


@dataclass(frozen=True, slots=True)
class MergeResult:
    rows: Mapping[str, Row]  # the clean rows, on the new base
    conflicts: tuple[Conflict, ...]  # by path

    @property
    def clean(self) -> bool:
        return not self.conflicts


class UnresolvedConflicts(Exception):
    def __init__(self, conflicts: Iterable[Conflict]) -> None:
        self.conflicts = tuple(conflicts)
        super().__init__(", ".join(c.path for c in self.conflicts))


def three_way(ancestor: Tree, ours: Overlay, theirs: Tree) -> MergeResult:
    """Carry the overlay ``ours`` (made on ``ancestor``) over to the tree ``theirs``."""
    rows: dict[str, Row] = {}
    conflicts: list[Conflict] = []
    for path in sorted(ours):
        b, o, t = ancestor.get(path), ours[path], theirs.get(path)
        if o == b or t == o:  # a no-op row, or the same change on both sides
            continue
        if t == b:
            rows[path] = Row(o, t)
        else:
            conflicts.append(Conflict(path, b, o, t))
    return MergeResult(rows, tuple(conflicts))


def resolve(result: MergeResult, resolutions: Mapping[str, Resolution]) -> dict[str, Row]:
    """The final rows: every conflict needs a resolution, and only conflicts may have one."""
    conflicting = {c.path for c in result.conflicts}
    stray = sorted(set(resolutions) - conflicting)
    if stray:
        raise ValueError(f"resolutions for paths without a conflict: {', '.join(stray)}")
    missing = [c for c in result.conflicts if c.path not in resolutions]
    if missing:
        raise UnresolvedConflicts(missing)
    rows = dict(result.rows)
    for c in result.conflicts:
        choice = resolutions[c.path]
        if choice == "theirs":
            continue
        blob = c.ours if choice == "ours" else choice
        if isinstance(blob, str):
            raise ValueError(f"unknown resolution {blob!r} for {c.path}")
        if blob != c.theirs:
            rows[c.path] = Row(blob, c.theirs)
    return dict(sorted(rows.items()))


def rebase(
    ancestor: Tree,
    ours: Overlay,
    latest: Tree,
    resolutions: Mapping[str, Resolution] | None = None,
) -> dict[str, Row]:
    """Rebase an overlay onto the latest tree, all or nothing (``UnresolvedConflicts``)."""
    return resolve(three_way(ancestor, ours, latest), resolutions or {})


def revert(before: Tree, reverted: Tree, latest: Tree) -> MergeResult:
    """Undo revision N (``reverted`` = its tree, ``before`` = the tree of N-1) on ``latest``."""
    return three_way(reverted, diff_trees(reverted, before), latest)


def restore(target: Tree, latest: Tree, paths: Iterable[str] | None = None) -> dict[str, Row]:
    """Make ``latest`` equal to ``target`` again, wholly or on ``paths``; never conflicts."""
    return {p: Row(blob, latest.get(p)) for p, blob in diff_trees(latest, target, paths).items()}
