"""The console's policy editor (``/console/policies``): the tenant's Cedar policies, one policy
with its text and versions, a new policy or version from a textarea, enable or disable, and the
dry run that replays recent messages against a draft. Every write is the API's action
(``policies.actions``) with the signed-in user's console token, so it is audited ``via:
console``; text that fails validation shows the validator's errors on the page."""

from __future__ import annotations

import uuid
from typing import Any
from urllib.parse import quote

from fastapi import APIRouter, Request
from platformkit.db.scope import tenant_transaction
from starlette.responses import RedirectResponse, Response

from agentbus.actions.context import Ctx
from agentbus.console.pages import _html, _page, console_token, signed_form, signed_in
from agentbus.console.sessions import Operator
from agentbus.db import SCOPE
from agentbus.errors import AgentBusError, NotFound
from agentbus.gateway.actions.administration import acting
from agentbus.gateway.context import get_gateway
from agentbus.ids import InvalidId, format_id, parse_id
from agentbus.policies import actions
from agentbus.store import console_views

router = APIRouter(include_in_schema=False)
DRY_RUN_LAST = 200


def _ctx(request: Request, op: Operator) -> Ctx:
    client = (request.client.host if request.client else None, request.headers.get("user-agent"))
    return acting(get_gateway(request), console_token(op), client)


def _errors(exc: AgentBusError) -> list[str]:
    """The validator's errors of an AB-4003, else the problem's detail."""
    return [str(e) for e in exc.data.get("errors") or [exc.detail or exc.title]]


def _to_policy(ref: str, notice: str) -> RedirectResponse:
    return RedirectResponse(f"/console/policies/{ref}?notice={quote(notice)}", status_code=303)


def _ref(row: dict[str, Any]) -> dict[str, Any]:
    return row | {"ref": format_id("pol", row["id"])}


async def _list_page(request: Request, op: Operator, status: int = 200, **context: Any) -> Response:
    rows = await actions.list_policies(_ctx(request, op), op.tenant_id)
    context = {"draft": {}, "errors": [], "dry_run": None, "last": DRY_RUN_LAST} | context
    page = await _page(request, op, "policies.html", title="Policies", nav="policies",
                       policies=[_ref(r) for r in rows], **context)  # fmt: skip
    page.status_code = status
    return page


@router.get("/console/policies")
@signed_in
async def policies_page(request: Request, op: Operator) -> Response:
    return await _list_page(request, op)


@router.post("/console/policies")
@signed_form
async def create_policy(request: Request, op: Operator, form: dict[str, Any]) -> Response:
    name, cedar = str(form.get("name") or ""), str(form.get("cedar") or "")
    try:
        row = await actions.create_policy(_ctx(request, op), op.tenant_id, name=name, cedar=cedar,
                                          workspace_id=None)  # fmt: skip
    except AgentBusError as exc:
        return await _list_page(request, op, exc.status, draft={"name": name, "cedar": cedar},
                                errors=_errors(exc))  # fmt: skip
    get_gateway(request).policy.invalidate(op.tenant_id)
    ref = format_id("pol", row["id"])
    return _to_policy(ref, f"{name} v1 was created")


@router.post("/console/policies/dry-run")
@signed_form
async def dry_run(request: Request, op: Operator, form: dict[str, Any]) -> Response:
    """Nothing is stored: the page shows what the draft would refuse, with the draft kept."""
    name, cedar = str(form.get("name") or "draft"), str(form.get("cedar") or "")
    draft = {"name": name, "cedar": cedar}
    try:
        replayed, refused = await actions.dry_run(_ctx(request, op), op.tenant_id, cedar=cedar,
                                                  name=name, workspace_id=None,
                                                  last=DRY_RUN_LAST)  # fmt: skip
    except AgentBusError as exc:
        return await _list_page(request, op, exc.status, draft=draft, errors=_errors(exc))
    async with tenant_transaction(get_gateway(request).pool, SCOPE, op.tenant_id) as conn:
        names = await console_views.agent_names(conn, op.tenant_id)
    rows = [
        {"ref": format_id("msg", r.message["id"]), "type": r.message["type"],
         "sender": names.get(r.message["from_agent_id"], "?"),
         "recipient": names.get(r.message["to_agent_id"], "?"), "action": r.action,
         "policy": r.decision.policy_name or "(no permit)", "reason": r.decision.reason}
        for r in refused
    ]  # fmt: skip
    return await _list_page(request, op, draft=draft,
                            dry_run={"replayed": replayed, "refused": rows})  # fmt: skip


def _policy_id(ref: str) -> uuid.UUID:
    try:
        return parse_id("pol", ref)
    except InvalidId as exc:
        raise NotFound(f"no policy {ref}") from exc


async def _policy_page(
    request: Request, op: Operator, ref: str, status: int = 200, **context: Any
) -> Response:
    try:
        row, versions = await actions.get_policy(_ctx(request, op), op.tenant_id, _policy_id(ref))
    except NotFound:
        return _html("no such policy", 404)
    context = {"draft": {"cedar": versions[-1]["cedar"]}, "errors": []} | context
    page = await _page(request, op, "policy.html", title=f"Policy {row['name']}",
                       nav="policies", policy=_ref(row), newest=_ref(versions[-1]),
                       versions=[_ref(v) for v in reversed(versions)], **context)  # fmt: skip
    page.status_code = status
    return page


@router.get("/console/policies/{ref}")
@signed_in
async def policy_page(request: Request, op: Operator, ref: str) -> Response:
    return await _policy_page(request, op, ref)


@router.post("/console/policies/{ref}/versions")
@signed_form
async def add_version(request: Request, op: Operator, form: dict[str, Any], ref: str) -> Response:
    cedar = str(form.get("cedar") or "")
    try:
        row = await actions.add_version(_ctx(request, op), op.tenant_id, _policy_id(ref), cedar)
    except NotFound:
        return _html("no such policy", 404)
    except AgentBusError as exc:
        return await _policy_page(request, op, ref, exc.status, draft={"cedar": cedar},
                                  errors=_errors(exc))  # fmt: skip
    get_gateway(request).policy.invalidate(op.tenant_id)
    new = format_id("pol", row["id"])
    return _to_policy(new, f"{row['name']} v{row['version']} was created")


@router.post("/console/policies/{ref}/enabled")
@signed_form
async def set_enabled(request: Request, op: Operator, form: dict[str, Any], ref: str) -> Response:
    enabled = form.get("enabled") == "true"
    try:
        row = await actions.set_enabled(_ctx(request, op), op.tenant_id, _policy_id(ref), enabled)
    except NotFound:
        return _html("no such policy", 404)
    except AgentBusError as exc:
        return await _policy_page(request, op, ref, exc.status, errors=_errors(exc))
    get_gateway(request).policy.invalidate(op.tenant_id)
    return _to_policy(ref, f"{row['name']} v{row['version']} is "
                           f"{'enabled' if enabled else 'disabled'}")  # fmt: skip
