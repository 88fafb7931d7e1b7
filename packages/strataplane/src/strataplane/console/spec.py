"""Spec pages: the revisions, the tree at any revision, one file at a revision with its
history, and the diff between two revisions (the API's reads); reverting a revision proposes a
change set that undoes it (the API's ``revert_revision``); restoring proposes one that brings
back the tree, or one file (deleted since, or changed), as it was at a revision (the API's
``restore_revision``)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path, Query, Request
from fastapi.responses import RedirectResponse
from starlette.responses import Response

from strataplane.actions import history, spec
from strataplane.actions.change_sets import InvalidFile, InvalidResolution, RebaseConflict
from strataplane.console.conflicts import conflicts_page, resolutions_of
from strataplane.console.render import TAG, render
from strataplane.console.session import Viewer, field, posted, viewer_of

router = APIRouter(include_in_schema=False, tags=[TAG])
Revision = Annotated[int | None, Query(ge=1, le=2**62)]


@router.get("/spec")
async def tree_page(request: Request, revision: Revision = None) -> Response:
    viewer = await viewer_of(request)
    found, tree = await history.revision_tree(viewer.ctx, revision)
    recent = await history.list_revisions(viewer.ctx, limit=50)
    return render(request, "spec_tree.html", revision=found, tree=tree, revisions=recent)


@router.get("/spec/files/{path:path}")
async def file_page(request: Request, path: str, revision: Revision = None) -> Response:
    viewer = await viewer_of(request)
    number, _blob, content = await history.revision_file(viewer.ctx, path[:1024], revision)
    versions = await history.path_log(viewer.ctx, path[:1024])
    text = content.decode("utf-8", "replace")
    return render(
        request, "spec_file.html", path=path, number=number, content=text, versions=versions
    )


@router.get("/spec/diff")
async def diff_page(
    request: Request,
    a: Annotated[int, Query(ge=1, le=2**62)],
    b: Annotated[int, Query(ge=1, le=2**62)],
) -> Response:
    viewer = await viewer_of(request)
    diffs = await history.diff_revisions(viewer.ctx, a, b)
    return render(request, "spec_diff.html", a=a, b=b, diffs=diffs)


@router.post("/spec/revisions/{number}/revert")
async def revert(request: Request, number: Annotated[int, Path(ge=1, le=2**62)]) -> Response:
    """A new draft that undoes revision ``number``; where later revisions changed the same
    files, the conflicts page, posting its choices back here."""
    viewer, form = await posted(request)
    resolutions, typed = resolutions_of(form)
    try:
        cs = await spec.revert_revision(viewer.ctx, number, resolutions=resolutions)
    except RebaseConflict as exc:
        return await _conflicts(request, viewer, number, exc, typed=typed)
    except (InvalidResolution, InvalidFile) as exc:  # an edited version the rules refuse
        try:  # the conflicts again (refused, so nothing is written)
            cs = await spec.revert_revision(viewer.ctx, number)
        except RebaseConflict as conflict:
            return await _conflicts(request, viewer, number, conflict, typed=typed, refusal=exc)
    return RedirectResponse(f"/change-sets/{cs.number}", status_code=303)


async def _conflicts(
    request: Request, viewer: Viewer, number: int, conflict: RebaseConflict, **extra: Any
) -> Response:
    return await conflicts_page(
        request, viewer, conflict, action=f"/spec/revisions/{number}/revert",
        heading=f"Resolve the revert of revision {number}",
        back=(f"/spec?revision={number}", f"Spec at revision {number}"),
        intro=f"Revisions after {number} changed these files again: ours is what undoing "
        f"revision {number} gives, theirs the latest revision's.", **extra,
    )  # fmt: skip


@router.post("/spec/revisions/{number}/restore")
async def restore(request: Request, number: Annotated[int, Path(ge=1, le=2**62)]) -> Response:
    """A new draft that makes the tree, or the one file posted as ``path``, equal revision
    ``number``: a deleted file comes back, a changed one returns to that version."""
    viewer, form = await posted(request)
    path = field(form, "path", 1024).strip()
    cs = await spec.restore_revision(viewer.ctx, number, paths=[path] if path else None)
    return RedirectResponse(f"/change-sets/{cs.number}", status_code=303)
