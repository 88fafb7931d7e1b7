"""Change sets: create, read, retitle and close, plus what every change-set action shares
(docs/strataplane/architecture.md §3).

Shared rules: every action on the content locks the row first, then checks state and the
digest the caller saw (``If-Match``: 428 without it, 412 on a mismatch); only the author edits
the overlay; ``change_set.author`` and ``change_set.merge`` must cover every changed file
(owners before and after, §5.3). Edits, rebase, revert and restore are in ``actions.spec``,
submit and reviews in ``actions.reviews``, merge and the reads of contents and diffs in
``actions.history``.

The errors (codes in brackets)::

    ChangeSetNotFound   [change_set.not_found]        404
    FileNotFound        [change_set.file_not_found]   404
    RevisionNotFound    [revision.not_found]          404
    NotAuthor           [change_set.not_author]       403 only the author does this
    ScopeDenied         [change_set.scope]            403 the role is held, the scope misses
    DigestMismatch      [change_set.digest_mismatch]  412 data: digest (the current one)
    DigestRequired      [change_set.digest_required]  428
    InvalidState        [change_set.invalid_state]    409 data: state
    Empty               [change_set.empty]            409
    NotValidated        [change_set.not_validated]    409
    BaseMoved           [change_set.base_moved]       409 data: base, latest
    NotApproved         [change_set.not_approved]     409 data: requirements
    RebaseConflict      [change_set.rebase_conflict]  409 data: conflicts
    InvalidFile         [change_set.invalid_file]     422 data: diagnostics
    InvalidResolution   [change_set.invalid_resolution] 422
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from uuid import UUID, uuid5

from platformkit.ids import uuid7

from strataplane import authz, errors
from strataplane.actions import fleet_hooks
from strataplane.actions.access import TenantTx, tenant_tx
from strataplane.actions.context import Ctx
from strataplane.domain.approvals import ChangedFile
from strataplane.domain.merge import Row
from strataplane.domain.spec.canonical import parse
from strataplane.domain.spec.diagnostics import SpecError
from strataplane.domain.spec.paths import kind_of
from strataplane.domain.tree import change_set_digest
from strataplane.store import blobs, counters, objects, revisions
from strataplane.store import change_sets as store
from strataplane.store import reviews as reviews_store
from strataplane.store.change_sets import NOW, ChangeSet


class ChangeSetNotFound(errors.NotFound):
    code, title = "change_set.not_found", "Change set not found"


class FileNotFound(errors.NotFound):
    code, title = "change_set.file_not_found", "The path exists neither in the base nor here"


class RevisionNotFound(errors.NotFound):
    code, title = "revision.not_found", "Revision not found"


class NotAuthor(errors.StrataplaneError):
    code, status, title = "change_set.not_author", 403, "Only the author changes the overlay"


class ScopeDenied(errors.StrataplaneError):
    code, status, title = "change_set.scope", 403, "Your bindings do not cover the change set"


class DigestMismatch(errors.StrataplaneError):
    code, status, title = "change_set.digest_mismatch", 412, "The change set has changed"


class DigestRequired(errors.StrataplaneError):
    code, status, title = "change_set.digest_required", 428, "Send If-Match with the digest"


class InvalidState(errors.Conflict):
    code, title = "change_set.invalid_state", "Not allowed in the change set's state"


class Empty(errors.Conflict):
    code, title = "change_set.empty", "The change set changes nothing"


class NotValidated(errors.Conflict):
    code, title = "change_set.not_validated", "No successful validation of this digest"


class BaseMoved(errors.Conflict):
    code, title = "change_set.base_moved", "The base is not the latest revision: rebase"


class NotApproved(errors.Conflict):
    code, title = "change_set.not_approved", "The approval requirements are not met"


class RebaseConflict(errors.Conflict):
    code, title = "change_set.rebase_conflict", "Paths changed on both sides need a resolution"


class InvalidFile(errors.InvalidInput):
    code, title = "change_set.invalid_file", "The file was rejected"


class InvalidResolution(errors.InvalidInput):
    code, title = "change_set.invalid_resolution", "Invalid conflict resolution"


type Ref = UUID | int
_NUMBER = re.compile(r"(?:CS-)?([0-9]{1,18})", re.IGNORECASE)
OPEN = ("draft", "in_review")


def parse_ref(text: str) -> Ref:
    """A change set id, or its number (``12`` or ``CS-12``)."""
    match = _NUMBER.fullmatch(text.strip())
    if match:
        return int(match.group(1))
    try:
        return UUID(text)
    except ValueError:
        raise ChangeSetNotFound() from None


async def load(tx: TenantTx, ref: Ref, *, lock: bool = False) -> ChangeSet:
    cs = await store.get_change_set(tx.conn, tx.tenant_id, ref, lock=lock)
    if cs is None:
        raise ChangeSetNotFound()
    return cs


def require_state(cs: ChangeSet, *states: str) -> None:
    if cs.state not in states:
        raise InvalidState(f"CS-{cs.number} is {cs.state}", state=cs.state)


def require_digest(cs: ChangeSet, seen: bytes | None) -> None:
    if seen is None:
        raise DigestRequired(digest=cs.digest.hex())
    if seen != cs.digest:
        raise DigestMismatch("reload the change set and retry", digest=cs.digest.hex())


def require_author(tx: TenantTx, cs: ChangeSet) -> None:
    if tx.ctx.principal is not None and tx.ctx.user_id != cs.author_id:
        raise NotAuthor("propose your own change set instead")


def digest_of(base: int, rows: dict[str, Row]) -> bytes:
    return change_set_digest(base, {p: r.blob_hash for p, r in rows.items()})


@dataclass(frozen=True)
class Changes:
    """The changed files with their owners (team slugs) before and after, and the same as the
    target that permission decisions need (team ids)."""

    files: tuple[ChangedFile, ...]
    target: authz.Target


# Owners that name no team of the tenant get an id no binding has, so no owner scope covers
# or intersects them (validation reports them as SP-2006).
_UNKNOWN_TEAMS = UUID("6f8b3c1e-2d4a-5b6c-8d7e-9f0a1b2c3d4e")


def _owner(content: bytes) -> str:
    try:
        owner = parse(content).get("owner")
    except SpecError:
        return ""
    return owner if isinstance(owner, str) else ""


async def changes_of(tx: TenantTx, base: int, rows: dict[str, Row]) -> Changes:
    if not rows:
        return Changes((), authz.Target())
    before = await objects.owners_at(tx.conn, tx.tenant_id, base, rows)
    written = [r.blob_hash for r in rows.values() if r.blob_hash is not None]
    contents = await blobs.get_blobs(tx.conn, tx.tenant_id, written)
    ids = await reviews_store.team_ids(tx.conn, tx.tenant_id)

    def team(slug: str | None) -> UUID | None:
        return None if slug is None else ids.get(slug) or uuid5(_UNKNOWN_TEAMS, slug)

    files = tuple(
        ChangedFile(
            path,
            kind_of(path) or "",
            before.get(path),
            _owner(contents[row.blob_hash]) if row.blob_hash is not None else None,
        )
        for path, row in rows.items()
    )
    target = authz.Target(
        files=tuple(
            authz.FileChange(f.kind, team(f.owner_before), team(f.owner_after)) for f in files
        )
    )
    return Changes(files, target)


def require_cover(tx: TenantTx, permission: str, target: authz.Target) -> None:
    """``permission`` with bindings that cover ``target``; 403 ``change_set.scope`` when the
    role is held but its scopes miss a changed file."""
    decision = tx.decide(permission, target)
    if decision.allowed:
        tx.used.update(decision.bindings)
        return
    if tx.decide(permission, authz.Target()).allowed:
        raise ScopeDenied(f"{permission} does not reach every changed file", permission=permission)
    raise errors.PermissionDenied(f"this needs the permission {permission}", permission=permission)


async def insert_new(
    tx: TenantTx,
    title: str,
    description: str,
    *,
    base: int,
    rows: dict[str, Row] | None = None,
    reverts: int | None = None,
) -> ChangeSet:
    """A new draft on ``base`` with overlay ``rows``, audited as ``change_set.create``."""
    if tx.ctx.user_id is None:
        raise errors.AuthRequired("change sets have a human or service-account author")
    rows = rows or {}
    number = await counters.take(tx.conn, tx.tenant_id, "change_set")
    cs = await store.insert_change_set(
        tx.conn,
        tx.tenant_id,
        uuid7(),
        number=number,
        title=title,
        description=description,
        author_id=tx.ctx.user_id,
        base_revision_id=base,
        digest=digest_of(base, rows),
        reverts_revision_id=reverts,
    )
    await store.replace_overlay(tx.conn, tx.tenant_id, cs.id, rows)
    details = {"number": number, "base_revision_id": base, "title": title, "files": len(rows)}
    await tx.audit("change_set.create", "change_set", cs.id, details)
    return cs


async def create_change_set(ctx: Ctx, title: str, description: str = "") -> ChangeSet:
    """A draft on the latest revision with an empty overlay."""
    if not title.strip():
        raise errors.InvalidInput("a change set needs a title", field="title")
    async with tenant_tx(ctx) as tx:
        require_cover(tx, "change_set.author", authz.Target())  # nothing changed yet
        latest = await revisions.latest_id(tx.conn, tx.tenant_id)
        return await insert_new(tx, title, description, base=latest)


async def list_change_sets(
    ctx: Ctx, *, state: str | None = None, before: int | None = None, limit: int = 100
) -> list[ChangeSet]:
    async with tenant_tx(ctx) as tx:
        tx.require("spec.read")
        return await store.list_change_sets(
            tx.conn, tx.tenant_id, state=state, before=before, limit=limit
        )


async def access_change_set(ctx: Ctx, ref: Ref) -> ChangeSet:
    async with tenant_tx(ctx) as tx:
        tx.require("spec.read")
        return await load(tx, ref)


async def update_change_set(
    ctx: Ctx, ref: Ref, *, title: str | None = None, description: str | None = None
) -> ChangeSet:
    """Title and description: not part of the digest, so no If-Match."""
    if title is not None and not title.strip():
        raise errors.InvalidInput("a change set needs a title", field="title")
    given = {"title": title, "description": description}
    fields = {k: v for k, v in given.items() if v is not None}
    async with tenant_tx(ctx) as tx:
        cs = await load(tx, ref, lock=True)
        require_state(cs, *OPEN)
        require_author(tx, cs)
        rows = await store.overlay(tx.conn, tx.tenant_id, cs.id)
        changes = await changes_of(tx, cs.base_revision_id, rows)
        require_cover(tx, "change_set.author", changes.target)
        if not fields:
            return cs
        cs = await store.update_change_set(tx.conn, tx.tenant_id, cs.id, fields)
        await tx.audit("change_set.update", "change_set", cs.id, {"fields": sorted(fields)})
        return cs


async def close_change_set(ctx: Ctx, ref: Ref) -> ChangeSet:
    """By the author (``change_set.author`` covering it) or with ``change_set.close_any``."""
    async with tenant_tx(ctx) as tx:
        cs = await load(tx, ref, lock=True)
        require_state(cs, *OPEN)
        if tx.ctx.principal is not None and tx.ctx.user_id == cs.author_id:
            rows = await store.overlay(tx.conn, tx.tenant_id, cs.id)
            target = (await changes_of(tx, cs.base_revision_id, rows)).target
            if not tx.decide("change_set.author", target).allowed:
                tx.require("change_set.close_any")
            else:
                require_cover(tx, "change_set.author", target)
        else:
            tx.require("change_set.close_any")
        fields = {"state": "closed", "closed_at": NOW}
        cs = await store.update_change_set(tx.conn, tx.tenant_id, cs.id, fields)
        await fleet_hooks.change_set_closed(tx.conn, tx.tenant_id, cs.id)
        await tx.audit("change_set.close", "change_set", cs.id, {"number": cs.number})
        return cs
