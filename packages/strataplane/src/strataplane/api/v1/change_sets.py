"""Change sets (docs/strataplane/architecture.md §3), and the tenant's operations.

A change set is addressed by id or number (``12``, ``CS-12``). Its ETag is its digest; every
request that acts on the content (edit, delete, rebase, submit, review, merge) sends it back in
``If-Match`` (428 ``change_set.digest_required`` without, 412 ``change_set.digest_mismatch``
when it moved). Creating POSTs honour ``Idempotency-Key``.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal, Self
from uuid import UUID

from fastapi import APIRouter, Depends, Header, Response
from platformkit.storable import PgBigInt
from pydantic import Field

from strataplane.actions import approval_status, change_sets, history, reviews, spec, validation
from strataplane.actions.change_sets import Ref
from strataplane.api.deps import TenantCtx, idempotency_key
from strataplane.api.v1.common import Model, OperationOut, PageLimit
from strataplane.api.v1.spec import TOML, FileDiffOut, RevisionOut, hexed
from strataplane.store.change_sets import ChangeSet
from strataplane.store.reviews import Review

router = APIRouter(prefix="/change-sets", tags=["change sets"])
operations_router = APIRouter(prefix="/operations", tags=["operations"])
Keyed = [Depends(idempotency_key)]
IfMatch = Annotated[
    str | None, Header(alias="If-Match", description='The digest you saw: `"<hex>"`.')
]


def seen(if_match: str | None) -> bytes | None:
    """The digest in If-Match; anything unreadable is a digest that matches nothing."""
    if if_match is None:
        return None
    try:
        return bytes.fromhex(if_match.strip().removeprefix("W/").strip('"'))
    except ValueError:
        return b""


def ref_of(ref: str) -> Ref:
    return change_sets.parse_ref(ref)


class ChangeSetIn(Model):
    title: str = Field(min_length=1, max_length=200)
    description: str = Field("", max_length=10_000)


class ChangeSetPatch(Model):
    title: str | None = Field(None, min_length=1, max_length=200)
    description: str | None = Field(None, max_length=10_000)


class ChangeSetOut(Model):
    id: UUID
    number: int
    title: str
    description: str
    author_id: UUID
    base_revision_id: int
    state: str
    digest: str
    validated: bool
    validated_digest: str | None
    validation: Any
    validation_current: bool
    impact: Any
    requirements: Any
    reverts_revision_id: int | None
    merged_revision_id: int | None
    created_at: datetime
    updated_at: datetime
    submitted_at: datetime | None
    merged_at: datetime | None
    closed_at: datetime | None

    @classmethod
    def of(cls, cs: ChangeSet) -> Self:
        fields = {k: v for k, v in cs.__dict__.items() if k in cls.model_fields}
        current = isinstance(cs.validation, dict) and cs.validation.get("digest") == cs.digest.hex()
        return cls(
            **{
                **fields,
                "digest": cs.digest.hex(),
                "validated": cs.validated,
                "validated_digest": hexed(cs.validated_digest),
                "validation_current": current,
            }
        )


def render(response: Response, cs: ChangeSet) -> ChangeSetOut:
    response.headers["ETag"] = f'"{cs.digest.hex()}"'
    return ChangeSetOut.of(cs)


class FileRowOut(Model):
    path: str
    blob_hash: str | None
    base_hash: str | None


class FileIn(Model):
    content: str


class EditOut(Model):
    change_set: ChangeSetOut
    path: str
    blob_hash: str | None
    notices: list[dict[str, Any]]


class NewContent(Model):
    content: str


Resolution = Literal["ours", "theirs"] | NewContent


def _resolutions(given: dict[str, Resolution]) -> dict[str, str | bytes]:
    return {p: r if isinstance(r, str) else r.content.encode() for p, r in given.items()}


class RebaseIn(Model):
    resolutions: dict[str, Resolution] = Field(default_factory=dict)


class RevertIn(Model):
    revision: PgBigInt
    resolutions: dict[str, Resolution] = Field(default_factory=dict)


class RestoreIn(Model):
    revision: PgBigInt
    paths: list[str] | None = None


class ReviewIn(Model):
    decision: Literal["approve", "reject", "comment"]
    comment: str | None = None
    acting_teams: list[str] | None = None


class ReviewOut(Model):
    id: UUID
    reviewer_id: UUID
    reviewer_name: str
    decision: str
    digest: str
    acting_teams: list[str]
    comment: str | None
    created_at: datetime

    @classmethod
    def of(cls, r: Review) -> Self:
        fields = {k: v for k, v in r.__dict__.items() if k in cls.model_fields}
        return cls(**{**fields, "digest": r.digest.hex()})


class MergeOut(Model):
    change_set: ChangeSetOut
    revision: RevisionOut


@router.post("", status_code=201, dependencies=Keyed)
async def create_change_set(ctx: TenantCtx, body: ChangeSetIn, response: Response) -> ChangeSetOut:
    cs = await change_sets.create_change_set(ctx, body.title, body.description)
    response.headers["Location"] = f"/api/v1/change-sets/{cs.id}"
    return render(response, cs)


@router.get("")
async def list_change_sets(
    ctx: TenantCtx,
    state: Literal["draft", "in_review", "merged", "closed"] | None = None,
    before: PgBigInt | None = None,
    limit: PageLimit = 100,
) -> list[ChangeSetOut]:
    """Newest first; pass the last number as ``before`` for the next page."""
    found = await change_sets.list_change_sets(ctx, state=state, before=before, limit=limit)
    return [ChangeSetOut.of(cs) for cs in found]


@router.post("/revert", status_code=201, dependencies=Keyed)
async def revert(ctx: TenantCtx, body: RevertIn, response: Response) -> ChangeSetOut:
    """A change set that undoes a revision (conflicts: 409 change_set.rebase_conflict)."""
    cs = await spec.revert_revision(ctx, body.revision, resolutions=_resolutions(body.resolutions))
    response.headers["Location"] = f"/api/v1/change-sets/{cs.id}"
    return render(response, cs)


@router.post("/restore", status_code=201, dependencies=Keyed)
async def restore(ctx: TenantCtx, body: RestoreIn, response: Response) -> ChangeSetOut:
    """A change set that makes the tree (or the given paths) equal a revision again."""
    cs = await spec.restore_revision(ctx, body.revision, paths=body.paths)
    response.headers["Location"] = f"/api/v1/change-sets/{cs.id}"
    return render(response, cs)


@router.get("/{ref}")
async def get_change_set(ctx: TenantCtx, ref: str, response: Response) -> ChangeSetOut:
    return render(response, await change_sets.access_change_set(ctx, ref_of(ref)))


@router.patch("/{ref}")
async def update_change_set(
    ctx: TenantCtx, ref: str, body: ChangeSetPatch, response: Response
) -> ChangeSetOut:
    """Title and description; they are not part of the digest, so no If-Match."""
    cs = await change_sets.update_change_set(
        ctx, ref_of(ref), title=body.title, description=body.description
    )
    return render(response, cs)


@router.get("/{ref}/files")
async def list_files(ctx: TenantCtx, ref: str, response: Response) -> list[FileRowOut]:
    """The overlay: one row per changed path (``blob_hash`` null: deleted)."""
    cs, rows = await history.change_set_files(ctx, ref_of(ref))
    response.headers["ETag"] = f'"{cs.digest.hex()}"'
    return [
        FileRowOut(path=p, blob_hash=hexed(r.blob_hash), base_hash=hexed(r.base_hash))
        for p, r in rows.items()
    ]


@router.get(
    "/{ref}/files/{path:path}",
    response_class=Response,
    responses={200: {"content": {TOML: {}}, "description": "The content in the result."}},
)
async def get_file(ctx: TenantCtx, ref: str, path: str) -> Response:
    cs, content = await history.change_set_file(ctx, ref_of(ref), path)
    return Response(content, media_type=TOML, headers={"ETag": f'"{cs.digest.hex()}"'})


@router.put("/{ref}/files/{path:path}")
async def write_file(
    ctx: TenantCtx, ref: str, path: str, body: FileIn, response: Response, if_match: IfMatch = None
) -> EditOut:
    """Write a file; it is stored in canonical form (422 change_set.invalid_file otherwise)."""
    edit = await spec.write_file(ctx, ref_of(ref), path, body.content.encode(), seen=seen(if_match))
    return EditOut(
        change_set=render(response, edit.change_set),
        path=path,
        blob_hash=hexed(edit.blob_hash),
        notices=[d.to_json() for d in edit.notices],
    )


@router.delete("/{ref}/files/{path:path}")
async def delete_file(
    ctx: TenantCtx, ref: str, path: str, response: Response, if_match: IfMatch = None
) -> ChangeSetOut:
    edit = await spec.delete_file(ctx, ref_of(ref), path, seen=seen(if_match))
    return render(response, edit.change_set)


@router.get("/{ref}/diff")
async def diff(ctx: TenantCtx, ref: str, response: Response) -> list[FileDiffOut]:
    cs, diffs = await history.diff_change_set(ctx, ref_of(ref))
    response.headers["ETag"] = f'"{cs.digest.hex()}"'
    return [FileDiffOut.of(d) for d in diffs]


@router.post("/{ref}/validate", status_code=202, dependencies=Keyed)
async def validate(ctx: TenantCtx, ref: str, response: Response) -> OperationOut:
    """Start validation (or return the one queued or running); poll the operation."""
    op, _created = await validation.request_validation(ctx, ref_of(ref))
    response.headers["Location"] = f"/api/v1/operations/{op.id}"
    return OperationOut.model_validate(op)


@router.post("/{ref}/submit")
async def submit(
    ctx: TenantCtx, ref: str, response: Response, if_match: IfMatch = None
) -> ChangeSetOut:
    cs = await reviews.submit_change_set(ctx, ref_of(ref), seen=seen(if_match))
    return render(response, cs)


@router.post("/{ref}/reviews", status_code=201, dependencies=Keyed)
async def review(
    ctx: TenantCtx, ref: str, body: ReviewIn, response: Response, if_match: IfMatch = None
) -> ReviewOut:
    cs, posted = await reviews.review_change_set(
        ctx,
        ref_of(ref),
        body.decision,
        seen=seen(if_match),
        comment=body.comment,
        acting_teams=body.acting_teams,
    )
    response.headers["ETag"] = f'"{cs.digest.hex()}"'
    return ReviewOut.of(posted)


@router.get("/{ref}/reviews")
async def list_reviews(ctx: TenantCtx, ref: str) -> list[ReviewOut]:
    return [ReviewOut.of(r) for r in await reviews.list_reviews(ctx, ref_of(ref))]


class RequirementOut(Model):
    teams: list[str] = Field(description="Empty: the minimum number of approvals of anyone.")
    count: int
    rules: list[str] = Field(description="ApprovalPolicy rules that require it.")
    approved_by: list[str]
    missing: int = Field(description="Approvals still needed.")
    can_satisfy: list[str] = Field(description="Who may still give one of them.")
    met: bool


class ApprovalStatusOut(Model):
    change_set: ChangeSetOut
    requirements: list[RequirementOut]
    rejected_by: list[str] = Field(description="Standing rejects; each blocks the merge.")
    approved: bool


@router.get("/{ref}/approvals")
async def get_approvals(ctx: TenantCtx, ref: str, response: Response) -> ApprovalStatusOut:
    """Each approval requirement, who has met it, who can still meet it and what is missing,
    evaluated now by the rules merge applies."""
    status = await approval_status.approval_status(ctx, ref_of(ref))
    return ApprovalStatusOut(
        change_set=render(response, status.change_set),
        requirements=[RequirementOut(**r.__dict__) for r in status.requirements],
        rejected_by=status.rejected_by,
        approved=status.approved,
    )


@router.post("/{ref}/merge", dependencies=Keyed)
async def merge(ctx: TenantCtx, ref: str, response: Response, if_match: IfMatch = None) -> MergeOut:
    """Create the next revision (409 change_set.base_moved: rebase first)."""
    cs, revision = await history.merge_change_set(ctx, ref_of(ref), seen=seen(if_match))
    return MergeOut(change_set=render(response, cs), revision=RevisionOut.of(revision))


@router.post("/{ref}/rebase")
async def rebase(
    ctx: TenantCtx, ref: str, body: RebaseIn, response: Response, if_match: IfMatch = None
) -> ChangeSetOut:
    """Onto the latest revision; every conflict needs a resolution (ours, theirs, content)."""
    cs = await spec.rebase_change_set(
        ctx, ref_of(ref), seen=seen(if_match), resolutions=_resolutions(body.resolutions)
    )
    return render(response, cs)


@router.post("/{ref}/close")
async def close(ctx: TenantCtx, ref: str, response: Response) -> ChangeSetOut:
    return render(response, await change_sets.close_change_set(ctx, ref_of(ref)))


@operations_router.get("/{operation_id}")
async def get_operation(ctx: TenantCtx, operation_id: UUID) -> OperationOut:
    return OperationOut.model_validate(await validation.access_operation(ctx, operation_id))
