"""The schedules page: the project's schedules with their runs; create, edit, enable, disable,
run now and delete (operators), through the same actions as the API."""

from __future__ import annotations

import uuid
from typing import Any

from fastapi import APIRouter, Request
from platformkit import boundedjson
from starlette.datastructures import FormData
from starlette.responses import RedirectResponse, Response

from z4j.actions import schedules
from z4j.actions.access import access_project
from z4j.actions.errors import Conflict, InvalidInput
from z4j.api.v1.deps import require_ctx
from z4j.console.forms import field, signed_in_form
from z4j.console.render import render

router = APIRouter(include_in_schema=False)
_BASE = "/projects/{project_id}/schedules"


def _json(form: FormData, name: str, default: str) -> Any:
    """A JSON field, parsed with the bounds the API's bodies have (the request guard sees the
    field as text only)."""
    text = field(form, name).strip() or default
    try:
        return boundedjson.loads(text)
    except boundedjson.JsonRefused as exc:
        raise InvalidInput(f"{name} must be JSON: {exc.reason}.", field=name) from None


def _values(form: FormData) -> dict[str, Any]:
    """The schedule a form describes; empty optional fields take their defaults."""
    values: dict[str, Any] = {
        "name": field(form, "name"),
        "task": field(form, "task"),
        "schedule_type": field(form, "schedule_type"),
        "expression": field(form, "expression"),
        "args": _json(form, "args", "[]"),
        "kwargs": _json(form, "kwargs", "{}"),
        "queue": field(form, "queue").strip() or None,
        "skip_if_running": field(form, "skip_if_running") == "1",
    }
    if field(form, "timezone").strip():
        values["timezone"] = field(form, "timezone").strip()
    return values


async def _page(
    request: Request, project_id: uuid.UUID, status: int = 200, **extra: Any
) -> Response:
    access, rows = await schedules.list_schedules(require_ctx(request), project_id)
    return render(
        request,
        "schedules.html",
        status=status,
        section="schedules",
        project=access.project,
        access=access,
        schedules=rows,
        **extra,
    )


@router.get(_BASE)
async def schedule_list(request: Request, project_id: uuid.UUID) -> Response:
    return await _page(request, project_id)


@router.post(_BASE)
async def schedule_create(request: Request, project_id: uuid.UUID) -> Response:
    ctx, form = await signed_in_form(request)
    try:
        values = _values(form)
        values["enabled"] = field(form, "enabled") == "1"
        row = await schedules.create_schedule(ctx, project_id, values)
    except (InvalidInput, Conflict) as exc:
        return await _page(
            request, project_id, status=exc.status, error=exc.detail or exc.title, form=dict(form)
        )
    return RedirectResponse(f"/projects/{project_id}/schedules#s-{row['id']}", status_code=303)


@router.get(_BASE + "/{schedule_id}")
async def schedule_edit(
    request: Request, project_id: uuid.UUID, schedule_id: uuid.UUID
) -> Response:
    ctx = require_ctx(request)
    access = await access_project(ctx, project_id)
    row = await schedules.get_schedule(ctx, project_id, schedule_id)
    return render(
        request, "schedule.html", section="schedules", project=access.project, access=access,
        schedule=row,
    )  # fmt: skip


@router.post(_BASE + "/{schedule_id}")
async def schedule_save(
    request: Request, project_id: uuid.UUID, schedule_id: uuid.UUID
) -> Response:
    ctx, form = await signed_in_form(request)
    try:
        await schedules.update_schedule(ctx, project_id, schedule_id, _values(form))
    except (InvalidInput, Conflict) as exc:
        access = await access_project(ctx, project_id)
        row = await schedules.get_schedule(ctx, project_id, schedule_id)
        return render(
            request, "schedule.html", status=exc.status, section="schedules",
            project=access.project, access=access, schedule=row, error=exc.detail or exc.title,
        )  # fmt: skip
    return RedirectResponse(f"/projects/{project_id}/schedules#s-{schedule_id}", status_code=303)


NOTICES = {"enable": "Enabled.", "disable": "Disabled.", "run": "It runs at the beat's next sync.",
           "delete": "Deleted."}  # fmt: skip


async def _act(
    request: Request, project_id: uuid.UUID, schedule_id: uuid.UUID, verb: str
) -> Response:
    ctx, _form = await signed_in_form(request)
    try:
        if verb in ("enable", "disable"):
            await schedules.set_enabled(ctx, project_id, schedule_id, verb == "enable")
        elif verb == "run":
            await schedules.run_now(ctx, project_id, schedule_id)
        else:
            await schedules.delete_schedule(ctx, project_id, schedule_id)
    except (InvalidInput, Conflict) as exc:
        return await _page(request, project_id, status=exc.status, error=exc.detail or exc.title)
    return await _page(request, project_id, notice=NOTICES[verb])


def _route(verb: str) -> None:
    async def act(request: Request, project_id: uuid.UUID, schedule_id: uuid.UUID) -> Response:
        return await _act(request, project_id, schedule_id, verb)

    router.add_api_route(_BASE + "/{schedule_id}/" + verb, act, methods=["POST"], name=verb)


for _verb in NOTICES:
    _route(_verb)
