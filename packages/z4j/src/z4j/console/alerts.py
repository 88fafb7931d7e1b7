"""The alerts page: the project's rules (created, switched and deleted here by admins and
owners) and its latest firings with what their notices reached."""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from fastapi import APIRouter, Request
from starlette.datastructures import FormData
from starlette.responses import Response

from z4j.actions import alerts
from z4j.actions.context import Ctx
from z4j.actions.errors import Conflict, InvalidInput, NotFound
from z4j.api.v1.deps import require_ctx
from z4j.console.forms import field, submit_project_form
from z4j.console.render import render
from z4j.domain.alerts import UNIT, Kind, webhook_masked
from z4j.domain.roles import Permission

router = APIRouter(include_in_schema=False)
_SHOWN = (InvalidInput, Conflict, NotFound)


async def _page(
    request: Request, ctx: Ctx, project_id: uuid.UUID, status: int = 200, **context: Any
) -> Response:
    access, rules, firings = await alerts.list_rules(ctx, project_id)
    if not access.can(Permission.ALERT_MANAGE):
        rules = [{**r, "webhook_url": webhook_masked(r["webhook_url"])} for r in rules]
    return render(
        request, "alerts.html", status=status, project=access.project, access=access,
        section="alerts", rules=rules, firings=firings, kinds=list(Kind), units=UNIT,
        **context,
    )  # fmt: skip


def _number(form: FormData, name: str) -> object:
    text = field(form, name).strip()
    if not text:
        return None
    try:
        return int(text) if text.isdigit() and len(text) <= 9 else float(text)
    except ValueError:
        return text  # refused with the field named


def _values(form: FormData) -> dict[str, object]:
    values: dict[str, object] = {
        "name": field(form, "name"),
        "kind": field(form, "kind"),
        "threshold": _number(form, "threshold"),
        "task_name": field(form, "task_name") or None,
        "queue": field(form, "queue") or None,
        "agent_name": field(form, "agent_name") or None,
        "webhook_url": field(form, "webhook_url").strip() or None,
        "emails": field(form, "emails").replace(",", " ").split(),
    }
    for key in ("window_seconds", "min_tasks"):
        number = _number(form, key)
        if number is not None:
            values[key] = number
    return values


async def _submit(
    request: Request, project_id: uuid.UUID, action: Callable[[Ctx, FormData], Awaitable[str]]
) -> Response:
    return await submit_project_form(request, project_id, action, page=_page, shown=_SHOWN,
                                     kept=lambda form: {"form": dict(form)})  # fmt: skip


@router.get("/projects/{project_id}/alerts")
async def alert_page(request: Request, project_id: uuid.UUID) -> Response:
    return await _page(request, require_ctx(request), project_id)


@router.post("/projects/{project_id}/alerts")
async def create(request: Request, project_id: uuid.UUID) -> Response:
    async def add(ctx: Ctx, form: FormData) -> str:
        row = await alerts.create_rule(ctx, project_id, _values(form))
        return f"Rule {row['name']} created."

    return await _submit(request, project_id, add)


@router.post("/projects/{project_id}/alerts/{rule_id}/enabled")
async def switch(request: Request, project_id: uuid.UUID, rule_id: uuid.UUID) -> Response:
    async def flip(ctx: Ctx, form: FormData) -> str:
        enabled = field(form, "enabled") == "1"
        row = await alerts.update_rule(ctx, project_id, rule_id, {"enabled": enabled})
        return f"Rule {row['name']} {'enabled' if enabled else 'disabled'}."

    return await _submit(request, project_id, flip)


@router.post("/projects/{project_id}/alerts/{rule_id}/delete")
async def delete(request: Request, project_id: uuid.UUID, rule_id: uuid.UUID) -> Response:
    async def drop(ctx: Ctx, _form: FormData) -> str:
        await alerts.delete_rule(ctx, project_id, rule_id)
        return "Rule deleted."

    return await _submit(request, project_id, drop)
