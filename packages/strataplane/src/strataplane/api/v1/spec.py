"""The spec's history (permission spec.read): revisions, the tree and files at any revision,
the log of one path, and the diff between any two revisions."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Self
from uuid import UUID

from fastapi import APIRouter, Query
from fastapi.responses import Response
from platformkit.storable import PgBigInt

from strataplane.actions import history
from strataplane.actions.history import FileDiff
from strataplane.api.deps import TenantCtx
from strataplane.api.v1.common import Model, PageLimit
from strataplane.store.revisions import Revision

router = APIRouter(prefix="/spec", tags=["spec"])
TOML = "application/toml"


def hexed(value: bytes | None) -> str | None:
    return value.hex() if value is not None else None


class RevisionOut(Model):
    id: int
    tree_hash: str
    message: str
    created_by: UUID | None
    created_at: datetime
    change_set_id: UUID | None
    change_set_number: int | None

    @classmethod
    def of(cls, r: Revision) -> Self:
        return cls(**{**r.__dict__, "tree_hash": r.tree_hash.hex()})


class TreeEntryOut(Model):
    path: str
    kind: str
    name: str
    blob_hash: str
    owner_team: str


class TreeOut(Model):
    revision: RevisionOut
    files: list[TreeEntryOut]


class PathVersionOut(Model):
    valid_from: int
    valid_to: int | None
    blob_hash: str
    message: str
    created_by: UUID | None
    created_at: datetime
    change_set: int | None


class FileDiffOut(Model):
    path: str
    old_hash: str | None
    new_hash: str | None
    diff: str

    @classmethod
    def of(cls, d: FileDiff) -> Self:
        return cls(path=d.path, old_hash=hexed(d.old_hash), new_hash=hexed(d.new_hash), diff=d.diff)


Rev = Annotated[PgBigInt, Query(ge=1, description="A revision number (rN).")]


@router.get("/revisions")
async def list_revisions(
    ctx: TenantCtx, before: PgBigInt | None = None, limit: PageLimit = 100
) -> list[RevisionOut]:
    """Newest first; pass the last id as ``before`` for the next page."""
    return [
        RevisionOut.of(r) for r in await history.list_revisions(ctx, before=before, limit=limit)
    ]


@router.get("/revisions/latest")
async def latest_revision(ctx: TenantCtx) -> RevisionOut:
    return RevisionOut.of(await history.access_revision(ctx))


@router.get("/revisions/{number}")
async def get_revision(ctx: TenantCtx, number: PgBigInt) -> RevisionOut:
    return RevisionOut.of(await history.access_revision(ctx, number))


@router.get("/revisions/{number}/tree")
async def get_tree(ctx: TenantCtx, number: PgBigInt) -> TreeOut:
    """Every file of the revision (one range query over the validity ranges)."""
    revision, entries = await history.revision_tree(ctx, number)
    files = [TreeEntryOut(**{**e.__dict__, "blob_hash": e.blob_hash.hex()}) for e in entries]
    return TreeOut(revision=RevisionOut.of(revision), files=files)


@router.get(
    "/revisions/{number}/files/{path:path}",
    response_class=Response,
    responses={200: {"content": {TOML: {}}, "description": "The canonical content."}},
)
async def get_file(ctx: TenantCtx, number: PgBigInt, path: str) -> Response:
    found, blob, content = await history.revision_file(ctx, path, number)
    headers = {"ETag": f'"{blob.hex()}"', "X-Revision": str(found)}
    return Response(content, media_type=TOML, headers=headers)


@router.get("/log")
async def path_log(
    ctx: TenantCtx, path: Annotated[str, Query(description="A spec path.")]
) -> list[PathVersionOut]:
    """The versions of one file, newest first; a version whose ``valid_to`` starts no later
    version ended in a deletion there."""
    versions = await history.path_log(ctx, path)
    return [PathVersionOut(**{**v.__dict__, "blob_hash": v.blob_hash.hex()}) for v in versions]


@router.get("/diff")
async def diff(
    ctx: TenantCtx,
    from_: Annotated[PgBigInt, Query(alias="from", ge=1)],
    to: Rev,
) -> list[FileDiffOut]:
    """Files that differ between two revisions (either order), with unified diffs."""
    return [FileDiffOut.of(d) for d in await history.diff_revisions(ctx, from_, to)]
