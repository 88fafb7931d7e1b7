"""Proposing changes to the spec: file edits, rebase, and revert and restore as ordinary change
sets (docs/strataplane/architecture.md §3.2, §3.8, §3.9).

Every edit goes through ``check_edit`` (path rules, canonical TOML) and stores canonical bytes;
the overlay never holds a no-op row. An edit or rebase that changes the digest returns the change
set to draft, which is what makes earlier validations and approvals stop counting; one that
leaves the overlay as it was changes nothing and records nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace

from strataplane import errors
from strataplane.actions.access import TenantTx, tenant_tx
from strataplane.actions.change_sets import (
    OPEN,
    FileNotFound,
    InvalidFile,
    InvalidResolution,
    RebaseConflict,
    Ref,
    RevisionNotFound,
    changes_of,
    digest_of,
    insert_new,
    load,
    require_author,
    require_cover,
    require_digest,
    require_state,
)
from strataplane.actions.context import Ctx
from strataplane.actions.reviews import requirements_doc
from strataplane.domain import merge
from strataplane.domain.merge import Row
from strataplane.domain.spec.diagnostics import Diagnostic
from strataplane.domain.spec.validate import check_edit
from strataplane.store import blobs, objects, revisions
from strataplane.store import change_sets as store
from strataplane.store.change_sets import ChangeSet

type Resolution = str | bytes  # "ours", "theirs", or new content


@dataclass(frozen=True)
class Edit:
    change_set: ChangeSet
    path: str
    blob_hash: bytes | None
    notices: tuple[Diagnostic, ...] = ()  # SP-1006: comments were dropped


async def _store_content(
    tx: TenantTx, path: str, content: bytes
) -> tuple[bytes, tuple[Diagnostic, ...]]:
    check = check_edit(path, content)
    if check.canonical is None:
        diagnostics = [d.to_json() for d in check.diagnostics]
        raise InvalidFile(f"{path} was rejected", diagnostics=diagnostics)
    blob = await blobs.put_blob(tx.conn, tx.tenant_id, check.canonical.content)
    return blob, check.diagnostics


async def _tree(tx: TenantTx, number: int) -> dict[str, bytes]:
    return {e.path: e.blob_hash for e in await objects.tree_at(tx.conn, tx.tenant_id, number)}


async def _set_overlay(
    tx: TenantTx, cs: ChangeSet, rows: dict[str, Row], *, base: int | None = None
) -> ChangeSet:
    """Store a new overlay (and base): author coverage, digest, draft, requirements."""
    base = cs.base_revision_id if base is None else base
    changes = await changes_of(tx, base, rows)
    require_cover(tx, "change_set.author", changes.target)
    digest = digest_of(base, rows)
    # Reviews bind to the digest, so the new one starts with no approvals.
    doc = await requirements_doc(tx, replace(cs, digest=digest, base_revision_id=base), changes)
    fields = {"digest": digest, "state": "draft", "base_revision_id": base, "requirements": doc}
    return await store.update_change_set(tx.conn, tx.tenant_id, cs.id, fields)


async def _edit(ctx: Ctx, ref: Ref, path: str, content: bytes | None, seen: bytes | None) -> Edit:
    async with tenant_tx(ctx) as tx:
        cs = await load(tx, ref, lock=True)
        require_state(cs, *OPEN)
        require_digest(cs, seen)
        require_author(tx, cs)
        blob, notices = (
            await _store_content(tx, path, content) if content is not None else (None, ())
        )
        rows = await store.overlay(tx.conn, tx.tenant_id, cs.id)
        old = rows.get(path)
        at_base = await objects.file_at(tx.conn, tx.tenant_id, path, cs.base_revision_id)
        base_hash = at_base[0] if at_base is not None else None
        if blob is None and base_hash is None and old is None:
            raise FileNotFound(path=path)
        if blob == base_hash:
            rows.pop(path, None)
            await store.delete_file(tx.conn, tx.tenant_id, cs.id, path)
        else:
            rows[path] = Row(blob, base_hash)
            await store.put_file(tx.conn, tx.tenant_id, cs.id, path, rows[path])
        if digest_of(cs.base_revision_id, rows) == cs.digest:
            return Edit(cs, path, blob, notices)  # the overlay is as it was
        cs = await _set_overlay(tx, cs, dict(sorted(rows.items())))
        before = old.blob_hash if old is not None else base_hash
        details = {"path": path, "old": before and before.hex(), "new": blob and blob.hex()}
        await tx.audit("change_set.edit", "change_set", cs.id, details)
        return Edit(cs, path, blob, notices)


async def write_file(ctx: Ctx, ref: Ref, path: str, content: bytes, *, seen: bytes | None) -> Edit:
    """Write ``content`` (canonicalized) at ``path``; ``seen`` is the digest from If-Match."""
    return await _edit(ctx, ref, path, content, seen)


async def delete_file(ctx: Ctx, ref: Ref, path: str, *, seen: bytes | None) -> Edit:
    return await _edit(ctx, ref, path, None, seen)


async def _resolve(
    tx: TenantTx, result: merge.MergeResult, resolutions: Mapping[str, Resolution]
) -> dict[str, Row]:
    chosen: dict[str, merge.Resolution] = {}
    for path, choice in resolutions.items():
        if isinstance(choice, bytes):
            chosen[path] = (await _store_content(tx, path, choice))[0]
        elif choice in ("ours", "theirs"):
            chosen[path] = "ours" if choice == "ours" else "theirs"
        else:
            raise InvalidResolution(f"{path}: ours, theirs or new content", path=path)
    try:
        return merge.resolve(result, chosen)
    except merge.UnresolvedConflicts:
        raise RebaseConflict(conflicts=[c.to_json() for c in result.conflicts]) from None
    except ValueError as exc:
        raise InvalidResolution(str(exc)) from None


async def rebase_change_set(
    ctx: Ctx, ref: Ref, *, seen: bytes | None, resolutions: Mapping[str, Resolution] | None = None
) -> ChangeSet:
    """Three-way merge per file onto the latest revision, all or nothing."""
    async with tenant_tx(ctx) as tx:
        cs = await load(tx, ref, lock=True)
        require_state(cs, *OPEN)
        require_digest(cs, seen)
        require_author(tx, cs)
        latest = await revisions.latest_id(tx.conn, tx.tenant_id)
        if latest == cs.base_revision_id:
            return cs
        ours = {
            p: r.blob_hash for p, r in (await store.overlay(tx.conn, tx.tenant_id, cs.id)).items()
        }
        result = merge.three_way(
            await _tree(tx, cs.base_revision_id), ours, await _tree(tx, latest)
        )
        rows = await _resolve(tx, result, resolutions or {})
        await store.replace_overlay(tx.conn, tx.tenant_id, cs.id, rows)
        old_base = cs.base_revision_id
        cs = await _set_overlay(tx, cs, rows, base=latest)
        details = {
            "from": old_base,
            "to": latest,
            "files": len(rows),
            "resolved": sorted(resolutions or {}),
        }
        await tx.audit("change_set.rebase", "change_set", cs.id, details)
        return cs


async def _propose(
    tx: TenantTx, title: str, latest: int, rows: dict[str, Row], reverts: int | None
) -> ChangeSet:
    require_cover(tx, "change_set.author", (await changes_of(tx, latest, rows)).target)
    return await insert_new(tx, title, "", base=latest, rows=rows, reverts=reverts)


async def revert_revision(
    ctx: Ctx, number: int, *, resolutions: Mapping[str, Resolution] | None = None
) -> ChangeSet:
    """A change set on the latest revision that undoes what r<number> changed."""
    async with tenant_tx(ctx) as tx:
        revision = await revisions.get_revision(tx.conn, tx.tenant_id, number)
        if revision is None:
            raise RevisionNotFound()
        if number == 1:
            raise errors.InvalidInput("r1 is the empty tree; it has nothing to revert")
        latest = await revisions.latest_id(tx.conn, tx.tenant_id)
        result = merge.revert(
            await _tree(tx, number - 1), await _tree(tx, number), await _tree(tx, latest)
        )
        rows = await _resolve(tx, result, resolutions or {})
        return await _propose(tx, f"Revert r{number}: {revision.message}", latest, rows, number)


async def restore_revision(
    ctx: Ctx, number: int, *, paths: Iterable[str] | None = None
) -> ChangeSet:
    """A change set on the latest revision that makes the tree (or ``paths``) equal r<number>."""
    async with tenant_tx(ctx) as tx:
        if await revisions.get_revision(tx.conn, tx.tenant_id, number) is None:
            raise RevisionNotFound()
        latest = await revisions.latest_id(tx.conn, tx.tenant_id)
        rows = merge.restore(await _tree(tx, number), await _tree(tx, latest), paths)
        return await _propose(tx, f"Restore r{number}", latest, rows, None)
