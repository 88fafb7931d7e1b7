"""Editing a change set in the browser: a new change set, one file at a time with the file's
checks shown as you type (the same ``check_edit`` a save runs, on the text not yet saved),
saving (or deleting a file) at the digest the page showed, then validation and submission for
review."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import RedirectResponse
from starlette.responses import Response

from strataplane.actions import change_sets, history, reviews, spec, validation
from strataplane.actions.change_sets import FileNotFound, InvalidFile
from strataplane.console.change_sets import ref_of, seen_of
from strataplane.console.render import FRAGMENT_HEADER, TAG, render
from strataplane.console.session import field, posted, viewer_of
from strataplane.domain.spec.validate import check_edit

router = APIRouter(include_in_schema=False, tags=[TAG])
MAX_FILE = 1 << 20  # the spec's limit for one file
PathQuery = Annotated[str, Query(max_length=1024)]


@router.post("/change-sets/new")
async def create(request: Request) -> Response:
    viewer, form = await posted(request)
    title = field(form, "title", 200).strip() or "Untitled change"
    cs = await change_sets.create_change_set(viewer.ctx, title)
    return RedirectResponse(f"/change-sets/{cs.number}/edit", status_code=303)


async def _editor(
    request: Request, ref: str, path: str, content: str | None, status: int = 200, **extra: Any
) -> Response:
    viewer = await viewer_of(request)
    cs = await change_sets.access_change_set(viewer.ctx, ref_of(ref))
    if content is None and path:
        try:
            content = (await history.change_set_file(viewer.ctx, cs.id, path))[1].decode(
                "utf-8", "replace"
            )
        except FileNotFound:
            content = ""
    return render(
        request, "edit.html", status=status, cs=cs, file_path=path, content=content or "", **extra
    )


@router.get("/change-sets/{ref}/edit")
async def edit_page(request: Request, ref: str, path: PathQuery = "") -> Response:
    return await _editor(request, ref, path, None)


@router.post("/change-sets/{ref}/check")
async def check(request: Request, ref: str) -> Response:
    """The checks of the posted text, as the fragment the editor shows while one types."""
    viewer, form = await posted(request)
    await change_sets.access_change_set(viewer.ctx, ref_of(ref))  # 404 across tenants
    path, content = field(form, "path", 1024), field(form, "content", MAX_FILE)
    found = check_edit(path, content.encode())
    findings = [d.to_json() for d in found.diagnostics]
    return render(
        request, "_check.html", headers={FRAGMENT_HEADER: "1"}, findings=findings,
        accepted=found.canonical is not None,
    )  # fmt: skip


@router.post("/change-sets/{ref}/files")
async def save(request: Request, ref: str) -> Response:
    viewer, form = await posted(request)
    path, content = field(form, "path", 1024).strip(), field(form, "content", MAX_FILE)
    seen = seen_of(field(form, "digest", 200))
    try:
        edit = await spec.write_file(viewer.ctx, ref_of(ref), path, content.encode(), seen=seen)
    except InvalidFile as exc:
        findings = exc.data.get("diagnostics", []) if exc.data else []
        return await _editor(
            request, ref, path, content, status=422, findings=findings, accepted=False
        )
    return RedirectResponse(f"/change-sets/{edit.change_set.number}", status_code=303)


@router.post("/change-sets/{ref}/files/delete")
async def delete(request: Request, ref: str) -> Response:
    viewer, form = await posted(request)
    path, seen = field(form, "path", 1024).strip(), seen_of(field(form, "digest", 200))
    edit = await spec.delete_file(viewer.ctx, ref_of(ref), path, seen=seen)
    return RedirectResponse(f"/change-sets/{edit.change_set.number}", status_code=303)


@router.post("/change-sets/{ref}/validate")
async def validate(request: Request, ref: str) -> Response:
    viewer, _ = await posted(request)
    cs = await change_sets.access_change_set(viewer.ctx, ref_of(ref))
    await validation.request_validation(viewer.ctx, cs.id)
    return RedirectResponse(f"/change-sets/{cs.number}", status_code=303)


@router.post("/change-sets/{ref}/submit")
async def submit(request: Request, ref: str) -> Response:
    viewer, form = await posted(request)
    seen = seen_of(field(form, "digest", 200))
    cs = await reviews.submit_change_set(viewer.ctx, ref_of(ref), seen=seen)
    return RedirectResponse(f"/change-sets/{cs.number}", status_code=303)
