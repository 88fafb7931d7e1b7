"""Dashboard forms that issue commands: retry and cancel on a task's page, and the operate page
(purge a queue, rate-limit a task name, resize or restart a worker's pool, recent commands).

Each form calls the same action as the API; success goes back to the page with the command's
id, a refusal (role, capability, confirmation) is shown on the operate page or as the error
page for the task buttons.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import urlencode

from fastapi import APIRouter, Request
from starlette.datastructures import FormData
from starlette.responses import RedirectResponse, Response

from z4j.actions import bulk_retries, commands
from z4j.actions.access import access_project
from z4j.actions.context import Ctx
from z4j.actions.errors import Conflict, InvalidInput, PermissionDenied
from z4j.api.v1.deps import require_ctx
from z4j.api.v1.task_query import build_filters
from z4j.console.forms import field, signed_in_form
from z4j.console.projects import stream_url
from z4j.console.render import render, render_fragment, wants_fragment

router = APIRouter(include_in_schema=False)
_SHOWN = (InvalidInput, Conflict, PermissionDenied)


def _int(form: FormData, name: str) -> int | None:
    raw = field(form, name).strip()
    if not raw:
        return None
    digits = raw[1:] if raw[:1] in ("+", "-") else raw
    if not (digits.isascii() and digits.isdigit()) or len(raw) > 6:
        raise InvalidInput(f"{name} is a whole number.", field=name)
    return int(raw)


@router.post("/projects/{project_id}/tasks/{task_id}/retry")
async def retry(request: Request, project_id: uuid.UUID, task_id: uuid.UUID) -> Response:
    ctx, _form = await signed_in_form(request)
    row = await commands.retry_task(ctx, project_id, task_id)
    return RedirectResponse(
        f"/projects/{project_id}/tasks/{task_id}?command={row['id']}", status_code=303
    )


@router.post("/projects/{project_id}/tasks/{task_id}/cancel")
async def cancel(request: Request, project_id: uuid.UUID, task_id: uuid.UUID) -> Response:
    ctx, form = await signed_in_form(request)
    terminate = field(form, "terminate") == "1"
    row = await commands.cancel_task(ctx, project_id, task_id, terminate=terminate)
    return RedirectResponse(
        f"/projects/{project_id}/tasks/{task_id}?command={row['id']}", status_code=303
    )


async def _page(
    request: Request, ctx: Ctx, project_id: uuid.UUID, status: int = 200, **context: Any
) -> Response:
    access = await access_project(ctx, project_id)
    return render(
        request,
        "operate.html",
        status=status,
        project=access.project,
        access=access,
        section="operate",
        commands=await commands.list_commands(ctx, project_id, limit=50),
        **context,
    )


@router.get("/projects/{project_id}/operate")
async def operate(request: Request, project_id: uuid.UUID) -> Response:
    return await _page(request, require_ctx(request), project_id)


async def _issue(request: Request, project_id: uuid.UUID, which: str) -> Response:
    ctx, form = await signed_in_form(request)
    try:
        if which == "purge":
            row = await commands.purge_queue(
                ctx,
                project_id,
                field(form, "queue"),
                field(form, "confirm"),
                expected_depth=_int(form, "expected_depth"),
            )
        elif which == "rate":
            row = await commands.rate_limit(
                ctx, project_id, field(form, "task_name"), field(form, "rate"),
                field(form, "worker") or None,
            )  # fmt: skip
        elif which == "pool":
            row = await commands.resize_pool(
                ctx, project_id, field(form, "worker"), _int(form, "delta") or 0
            )
        else:
            row = await commands.restart_worker(ctx, project_id, field(form, "worker"))
    except _SHOWN as exc:
        if exc.code == "project.not_found":
            raise
        return await _page(request, ctx, project_id, exc.status, error=exc.detail or exc.title)
    notice = f"Command {row['id']} ({row['action']}) queued."
    return await _page(request, ctx, project_id, notice=notice)


@router.post("/projects/{project_id}/operate/purge")
async def purge(request: Request, project_id: uuid.UUID) -> Response:
    return await _issue(request, project_id, "purge")


@router.post("/projects/{project_id}/operate/rate-limit")
async def rate_limit(request: Request, project_id: uuid.UUID) -> Response:
    return await _issue(request, project_id, "rate")


@router.post("/projects/{project_id}/operate/pool")
async def pool(request: Request, project_id: uuid.UUID) -> Response:
    return await _issue(request, project_id, "pool")


@router.post("/projects/{project_id}/operate/restart")
async def restart(request: Request, project_id: uuid.UUID) -> Response:
    return await _issue(request, project_id, "restart")


_FILTER_FIELDS = ("name", "queue", "agent_id", "since", "until", "time_field", "q")


def _form_filters(form: FormData) -> tuple[Any, list[tuple[str, str]]]:
    states = [
        s
        for value in form.getlist("state")
        if isinstance(value, str)
        for s in value.split(",")
        if s
    ]
    raw = {key: field(form, key) for key in _FILTER_FIELDS}
    filters = build_filters(state=states, **raw)
    kept = [("state", s) for s in states] + [(k, v) for k, v in raw.items() if v]
    return filters, kept


@router.post("/projects/{project_id}/tasks/bulk-retry")
async def bulk_retry(request: Request, project_id: uuid.UUID) -> Response:
    """First the count (nothing runs), then, confirmed, the bulk retry's progress page."""
    ctx, form = await signed_in_form(request)
    filters, kept = _form_filters(form)
    maximum = _int(form, "max") or bulk_retries.MAX_BULK
    if field(form, "confirmed") == "1":
        started = await bulk_retries.start(ctx, project_id, filters, maximum)
        return RedirectResponse(
            f"/projects/{project_id}/bulk-retries/{started['id']}", status_code=303
        )
    preview = await bulk_retries.preview(ctx, project_id, filters, maximum)
    access = await access_project(ctx, project_id)
    return render(
        request, "bulk_confirm.html", project=access.project, access=access, section="tasks",
        preview=preview, kept=kept, back=f"/projects/{project_id}/tasks?{urlencode(kept)}",
    )  # fmt: skip


@router.get("/projects/{project_id}/bulk-retries/{bulk_id}")
async def bulk_page(request: Request, project_id: uuid.UUID, bulk_id: uuid.UUID) -> Response:
    ctx = require_ctx(request)
    bulk = await bulk_retries.access_bulk_retry(ctx, project_id, bulk_id)
    access = await access_project(ctx, project_id)
    context: dict[str, Any] = {"project": access.project, "access": access, "bulk": bulk}
    if wants_fragment(request):
        return render_fragment(request, "_bulk_progress.html", **context)
    return render(
        request, "bulk.html", stream_url=stream_url(project_id), section="tasks", **context
    )


Overview = Callable[[Ctx, uuid.UUID], Awaitable[tuple[dict[str, Any] | None, list[dict[str, Any]]]]]


async def _overview_page(
    request: Request, project_id: uuid.UUID, section: str, overview: Overview, **context: Any
) -> Response:
    """The queues or workers page: what an agent reads now beside what the brain recorded."""
    ctx = require_ctx(request)
    access = await access_project(ctx, project_id)
    read, rows = await overview(ctx, project_id)
    return render(
        request, f"{section}.html", project=access.project, access=access, section=section,
        rows=rows, read=read, **context,
    )  # fmt: skip


@router.get("/projects/{project_id}/queues")
async def queues_page(request: Request, project_id: uuid.UUID) -> Response:
    return await _overview_page(request, project_id, "queues", commands.queue_overview,
                                minutes=commands.RATE_MINUTES)  # fmt: skip


@router.get("/projects/{project_id}/workers")
async def workers_page(request: Request, project_id: uuid.UUID) -> Response:
    return await _overview_page(request, project_id, "workers", commands.worker_overview,
                                hours=commands.OUTCOME_HOURS)  # fmt: skip
