"""Merge, which alone creates revisions, and the reads of history: revisions, the tree at any
revision, a file's log, diffs between revisions and of a change set
(docs/strataplane/architecture.md §3.6, §3.7, §3.10).

Merge needs the digest the caller saw, the approvals, and a base that is the latest revision.
Two merges on one base serialize on the tenant_counter 'revision' row lock: the second reads the
committed counter, gets base + 2 and fails with ``change_set.base_moved``, rolling back its
increment, so history stays linear and gapless. Lock order: change set row, counter 'revision',
counter 'audit'.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from strataplane import authz
from strataplane.actions import fleet_hooks
from strataplane.actions.access import tenant_tx
from strataplane.actions.change_sets import (
    BaseMoved,
    FileNotFound,
    NotApproved,
    Ref,
    RevisionNotFound,
    changes_of,
    load,
    require_cover,
    require_digest,
    require_state,
)
from strataplane.actions.context import Ctx
from strataplane.actions.reviews import requirements_doc
from strataplane.domain.merge import Row
from strataplane.domain.spec.canonical import parse
from strataplane.domain.spec.index import index_columns
from strataplane.domain.tree import apply_overlay, tree_hash
from strataplane.store import blobs, counters, fleet_artifacts, objects, revisions
from strataplane.store import change_sets as store
from strataplane.store.change_sets import NOW, ChangeSet
from strataplane.store.objects import PathVersion, TreeEntry
from strataplane.store.revisions import Revision


class _Unapproved(Exception):
    def __init__(self, doc: dict[str, Any]) -> None:
        self.doc = doc


async def merge_change_set(ctx: Ctx, ref: Ref, *, seen: bytes | None) -> tuple[ChangeSet, Revision]:
    """Create the next revision from an approved change set on the latest revision."""
    try:
        async with tenant_tx(ctx) as tx:
            cs = await load(tx, ref, lock=True)
            require_state(cs, "in_review")
            require_digest(cs, seen)
            rows = await store.overlay(tx.conn, tx.tenant_id, cs.id)
            changes = await changes_of(tx, cs.base_revision_id, rows)
            require_cover(tx, "change_set.merge", changes.target)
            latest = await revisions.latest_id(tx.conn, tx.tenant_id)  # the cheap early check
            if latest != cs.base_revision_id:
                raise BaseMoved(base=cs.base_revision_id, latest=latest)
            doc = await requirements_doc(tx, cs, changes)
            if not doc["approved"]:
                raise _Unapproved(doc)
            base = {
                e.path: e.blob_hash for e in await objects.tree_at(tx.conn, tx.tenant_id, latest)
            }
            written = await blobs.get_blobs(
                tx.conn, tx.tenant_id, [r.blob_hash for r in rows.values() if r.blob_hash]
            )
            opened = [
                index_columns(p, parse(written[r.blob_hash]))
                for p, r in rows.items()
                if r.blob_hash is not None
            ]
            number = await counters.take(tx.conn, tx.tenant_id, "revision")  # the binding check
            if number - 1 != cs.base_revision_id:
                raise BaseMoved(base=cs.base_revision_id, latest=number - 1)
            tree = apply_overlay(base, {p: r.blob_hash for p, r in rows.items()})
            await revisions.insert_revision(
                tx.conn,
                tx.tenant_id,
                number,
                tree_hash=tree_hash(tree),
                message=f"CS-{cs.number}: {cs.title}",
                created_by=ctx.user_id,
            )
            closing = [p for p, r in rows.items() if r.base_hash is not None]
            closed = await objects.close_paths(tx.conn, tx.tenant_id, number, closing)
            if closed != len(closing):
                raise RuntimeError(f"closed {closed} spec_object ranges, expected {len(closing)}")
            await objects.open_objects(tx.conn, tx.tenant_id, number, opened)
            fields = {
                "state": "merged",
                "merged_revision_id": number,
                "merged_at": NOW,
                "requirements": doc,
            }
            cs = await store.update_change_set(tx.conn, tx.tenant_id, cs.id, fields)
            # Drops the impact rows and starts the rollouts; its NOTIFY is delivered at
            # commit and wakes the controllers.
            started = await fleet_hooks.change_set_merged(
                tx.conn, tx.tenant_id, cs.id, number, ctx.user_id
            )
            details = {
                "rollouts": [f"RO-{r.number}" for r in started],
                "revision": number,
                "digest": cs.digest.hex(),
                "files": len(rows),
                "tree_hash": tree_hash(tree).hex(),
            }
            await tx.audit("change_set.merge", "change_set", cs.id, details)
            revision = await revisions.get_revision(tx.conn, tx.tenant_id, number)
            if revision is None:
                raise RuntimeError(f"r{number} is not visible in the transaction that wrote it")
            return cs, revision
    except _Unapproved as refused:
        # Stored apart from the rolled-back merge, so readers see what is missing.
        async with tenant_tx(ctx) as tx:
            current = await load(tx, ref, lock=True)
            if current.digest.hex() == refused.doc["digest"] and current.state == "in_review":
                await store.update_change_set(
                    tx.conn, tx.tenant_id, current.id, {"requirements": refused.doc}
                )
        raise NotApproved(requirements=refused.doc) from None


async def list_revisions(
    ctx: Ctx, *, before: int | None = None, limit: int = 100
) -> list[Revision]:
    async with tenant_tx(ctx) as tx:
        tx.require("spec.read")
        return await revisions.list_revisions(tx.conn, tx.tenant_id, before=before, limit=limit)


async def access_revision(ctx: Ctx, number: int | None = None) -> Revision:
    """Revision ``number``, or the latest."""
    async with tenant_tx(ctx) as tx:
        tx.require("spec.read")
        n = number if number is not None else await revisions.latest_id(tx.conn, tx.tenant_id)
        found = await revisions.get_revision(tx.conn, tx.tenant_id, n)
    if found is None:
        raise RevisionNotFound()
    return found


async def revision_tree(ctx: Ctx, number: int | None = None) -> tuple[Revision, list[TreeEntry]]:
    async with tenant_tx(ctx) as tx:
        tx.require("spec.read")
        n = number if number is not None else await revisions.latest_id(tx.conn, tx.tenant_id)
        found = await revisions.get_revision(tx.conn, tx.tenant_id, n)
        if found is None:
            raise RevisionNotFound()
        return found, await objects.tree_at(tx.conn, tx.tenant_id, n)


async def revision_file(ctx: Ctx, path: str, number: int | None = None) -> tuple[int, bytes, bytes]:
    """(revision, blob hash, content) of ``path`` at ``number`` (default: the latest)."""
    async with tenant_tx(ctx) as tx:
        tx.require("spec.read")
        n = number if number is not None else await revisions.latest_id(tx.conn, tx.tenant_id)
        if await revisions.get_revision(tx.conn, tx.tenant_id, n) is None:
            raise RevisionNotFound()
        found = await objects.file_at(tx.conn, tx.tenant_id, path, n)
    if found is None:
        raise FileNotFound(path=path)
    return n, found[0], found[1]


async def path_log(ctx: Ctx, path: str) -> list[PathVersion]:
    async with tenant_tx(ctx) as tx:
        tx.require("spec.read")
        return await objects.path_log(tx.conn, tx.tenant_id, path)


@dataclass(frozen=True)
class FileDiff:
    path: str
    old_hash: bytes | None  # None: added
    new_hash: bytes | None  # None: deleted
    diff: str  # unified diff of the canonical contents


def unified(path: str, old: bytes | None, new: bytes | None) -> str:
    a = old.decode("utf-8").splitlines(keepends=True) if old is not None else []
    b = new.decode("utf-8").splitlines(keepends=True) if new is not None else []
    left = f"a/{path}" if old is not None else "/dev/null"
    right = f"b/{path}" if new is not None else "/dev/null"
    return "".join(difflib.unified_diff(a, b, left, right))


async def diff_revisions(ctx: Ctx, a: int, b: int) -> list[FileDiff]:
    """What changed from revision ``a`` to ``b`` (either order)."""
    async with tenant_tx(ctx) as tx:
        tx.require("spec.read")
        for n in (a, b):
            if await revisions.get_revision(tx.conn, tx.tenant_id, n) is None:
                raise RevisionNotFound(revision=n)
        low, high = sorted((a, b))
        rows = await objects.diff_revisions(tx.conn, tx.tenant_id, low, high)
        if a > b:
            rows = [(p, new, old) for p, old, new in rows]
        found = await blobs.get_blobs(tx.conn, tx.tenant_id, [h for r in rows for h in r[1:] if h])
    return [
        FileDiff(p, o, n, unified(p, found.get(o or b""), found.get(n or b""))) for p, o, n in rows
    ]


async def diff_change_set(ctx: Ctx, ref: Ref) -> tuple[ChangeSet, list[FileDiff]]:
    """Each overlay row against the change set's base revision."""
    async with tenant_tx(ctx) as tx:
        tx.require("spec.read")
        cs = await load(tx, ref)
        rows = await store.overlay(tx.conn, tx.tenant_id, cs.id)
        wanted = [h for r in rows.values() for h in (r.blob_hash, r.base_hash) if h is not None]
        found = await blobs.get_blobs(tx.conn, tx.tenant_id, wanted)
    return cs, [
        FileDiff(
            p,
            r.base_hash,
            r.blob_hash,
            unified(p, found.get(r.base_hash or b""), found.get(r.blob_hash or b"")),
        )
        for p, r in rows.items()
    ]


async def change_set_files(ctx: Ctx, ref: Ref) -> tuple[ChangeSet, dict[str, Row]]:
    async with tenant_tx(ctx) as tx:
        tx.require("spec.read")
        cs = await load(tx, ref)
        return cs, await store.overlay(tx.conn, tx.tenant_id, cs.id)


async def change_set_file(ctx: Ctx, ref: Ref, path: str) -> tuple[ChangeSet, bytes]:
    """The content of ``path`` in the change set's resulting tree."""
    async with tenant_tx(ctx) as tx:
        tx.require("spec.read")
        cs = await load(tx, ref)
        row = (await store.overlay(tx.conn, tx.tenant_id, cs.id)).get(path)
        content: bytes | None = None
        if row is not None and row.blob_hash is not None:
            content = await blobs.get_blob(tx.conn, tx.tenant_id, row.blob_hash)
        elif row is None:
            found = await objects.file_at(tx.conn, tx.tenant_id, path, cs.base_revision_id)
            content = found[1] if found is not None else None
    if content is None:
        raise FileNotFound(path=path)
    return cs, content


async def blobs_of(ctx: Ctx, hashes: Iterable[bytes]) -> dict[bytes, bytes]:
    """The contents of blobs of the tenant by hash (a rebase conflict names its sides so)."""
    async with tenant_tx(ctx) as tx:
        tx.require("spec.read")
        return await blobs.get_blobs(tx.conn, tx.tenant_id, list(hashes)[:200])


async def impacted_agents(ctx: Ctx, ref: Ref, *, limit: int = 500) -> list[dict[str, Any]]:
    """The per-agent impact preview of an open change set (validation computes it): each
    agent the caller may read whose artifact the change set changes, before and after."""
    async with tenant_tx(ctx) as tx:
        tx.require("spec.read")
        cs = await load(tx, ref)
        rows = await fleet_artifacts.impact_agents(tx.conn, tx.tenant_id, cs.id, limit)
        return [
            row
            for row in rows
            if tx.decide(
                "inventory.read",
                authz.Target(hosts=(authz.Host(row["owner"], dict(row["labels"])),)),
            ).allowed
        ]
