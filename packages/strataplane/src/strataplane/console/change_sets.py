"""Change set pages: the list, and one change set with its diff, validation, the agents it
will change, its approval requirements and reviews; approving, rejecting, commenting and
merging (and rebasing onto the latest revision) post the digest the person was shown, so a
change made meanwhile is refused (409) rather than approved unseen; closing needs no digest.
A rebase with conflicts answers a page showing each conflicting file (base, this change set's,
the latest revision's) with the choice of ours, theirs or an edited version, posted back as the
rebase's resolutions (the API's)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query, Request
from fastapi.responses import RedirectResponse
from starlette.responses import Response

from strataplane import errors
from strataplane.actions import approval_status, change_sets, history, reviews, spec
from strataplane.actions.change_sets import InvalidFile, InvalidResolution, RebaseConflict, Ref
from strataplane.console.conflicts import conflicts_page, resolutions_of
from strataplane.console.render import TAG, render
from strataplane.console.session import Viewer, field, posted, viewer_of

router = APIRouter(include_in_schema=False, tags=[TAG])
DECISIONS = ("approve", "reject", "comment")
IMPACT_ROWS = 200


def ref_of(text: str) -> Ref:
    return change_sets.parse_ref(text[:100])  # ChangeSetNotFound for anything else


def seen_of(digest: str) -> bytes:
    try:
        return bytes.fromhex(digest)
    except ValueError:
        raise errors.InvalidInput("the page's digest is missing; reload", field="digest") from None


@router.get("/change-sets")
async def change_sets_page(
    request: Request,
    state: Annotated[Literal["draft", "in_review", "merged", "closed"] | None, Query()] = None,
) -> Response:
    viewer = await viewer_of(request)
    found = await change_sets.list_change_sets(viewer.ctx, state=state, limit=100)
    return render(request, "change_sets.html", change_sets=found, state=state)


@router.get("/change-sets/{ref}")
async def change_set_page(request: Request, ref: str) -> Response:
    viewer = await viewer_of(request)
    cs, diffs = await history.diff_change_set(viewer.ctx, ref_of(ref))
    status = await approval_status.approval_status(viewer.ctx, cs.id)
    found = await reviews.list_reviews(viewer.ctx, cs.id)
    impacted = await history.impacted_agents(viewer.ctx, cs.id, limit=IMPACT_ROWS)
    return render(
        request, "change_set.html", cs=cs, diffs=diffs, approvals=status, reviews=found,
        impacted=impacted, impact_rows=IMPACT_ROWS,
    )  # fmt: skip


@router.post("/change-sets/{ref}/review")
async def review(request: Request, ref: str) -> Response:
    viewer, form = await posted(request)
    decision = field(form, "decision", 20)
    if decision not in DECISIONS:
        raise errors.InvalidInput("approve, reject or comment", field="decision")
    comment = field(form, "comment", 10_000).strip() or None
    cs, _ = await reviews.review_change_set(
        viewer.ctx, ref_of(ref), decision, seen=seen_of(field(form, "digest", 200)),
        comment=comment,
    )  # fmt: skip
    return RedirectResponse(f"/change-sets/{cs.number}", status_code=303)


@router.post("/change-sets/{ref}/merge")
async def merge(request: Request, ref: str) -> Response:
    viewer, form = await posted(request)
    cs, _ = await history.merge_change_set(
        viewer.ctx, ref_of(ref), seen=seen_of(field(form, "digest", 200))
    )
    return RedirectResponse(f"/change-sets/{cs.number}", status_code=303)


async def _conflicts(
    request: Request, viewer: Viewer, ref: str, conflict: RebaseConflict, **extra: Any
) -> Response:
    cs = await change_sets.access_change_set(viewer.ctx, ref_of(ref))
    return await conflicts_page(
        request, viewer, conflict, action=f"/change-sets/{cs.number}/rebase",
        heading=f"Resolve the rebase of CS-{cs.number}", digest=cs.digest.hex(),
        back=(f"/change-sets/{cs.number}", f"CS-{cs.number}: {cs.title}"),
        intro=f"These files changed both in this change set (ours) and in the spec since "
        f"revision {cs.base_revision_id} (theirs).", **extra,
    )  # fmt: skip


@router.post("/change-sets/{ref}/rebase")
async def rebase(request: Request, ref: str) -> Response:
    """Onto the latest revision, with the resolutions posted from the conflicts page; a
    conflict left (or a first rebase that meets some) answers that page."""
    viewer, form = await posted(request)
    seen = seen_of(field(form, "digest", 200))
    resolutions, typed = resolutions_of(form)
    try:
        cs = await spec.rebase_change_set(
            viewer.ctx, ref_of(ref), seen=seen, resolutions=resolutions
        )
    except RebaseConflict as exc:
        return await _conflicts(request, viewer, ref, exc, typed=typed)
    except (InvalidResolution, InvalidFile) as exc:  # an edited version the rules refuse
        try:  # the conflicts again (refused, so nothing is written)
            cs = await spec.rebase_change_set(viewer.ctx, ref_of(ref), seen=seen)
        except RebaseConflict as conflict:
            return await _conflicts(request, viewer, ref, conflict, typed=typed, refusal=exc)
    return RedirectResponse(f"/change-sets/{cs.number}", status_code=303)


@router.post("/change-sets/{ref}/close")
async def close(request: Request, ref: str) -> Response:
    viewer, _ = await posted(request)
    cs = await change_sets.close_change_set(viewer.ctx, ref_of(ref))
    return RedirectResponse(f"/change-sets/{cs.number}", status_code=303)
