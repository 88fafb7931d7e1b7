"""The console's pages (``/console``): server-rendered HTML for a tenant's owners and admins.

Each page reads through the same reads as the API (``analytics.reads``, ``store.console_views``)
and writes through the same actions (``gateway.redrive``); a form carries the session's CSRF
token and a POST without it is refused. Pages without analytics (another process owns chDB)
show what PostgreSQL knows and say that the charts are elsewhere.
"""

from __future__ import annotations

import functools
import inspect
import uuid
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Any, Concatenate

from fastapi import APIRouter, Request
from jinja2 import Environment, PackageLoader, select_autoescape
from platformkit.db.scope import tenant_transaction
from platformkit.http import session_secrets
from platformkit.http.cookies import CookiePolicy
from starlette.responses import HTMLResponse, RedirectResponse, Response

from agentbus.analytics import reads
from agentbus.console import charts
from agentbus.console.sessions import COOKIE, SESSION_TTL, Operator, operator_of, sign_out, use_link
from agentbus.db import SCOPE
from agentbus.errors import AgentBusError
from agentbus.gateway.actions import redrive
from agentbus.gateway.context import Gateway, get_gateway
from agentbus.ids import format_id, parse_id
from agentbus.store import console_views
from agentbus.store.integration_tokens import VerifiedToken

router = APIRouter(include_in_schema=False)
templates = Environment(
    loader=PackageLoader("agentbus.console", "templates"), autoescape=select_autoescape()
)
TASK_STATES = ("submitted", "delivered", "accepted", "in_progress", "completed", "failed",
               "rejected", "cancelled", "expired")  # fmt: skip
SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; style-src 'self'; "
    "script-src 'self'; frame-ancestors 'none'; form-action 'self'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}
CSRF_REFUSED = "refused: the form's token did not match the session"


def _policy(gw: Gateway) -> CookiePolicy:
    return CookiePolicy.of(
        force_secure=gw.settings.secure_cookies, public_url=gw.settings.public_url
    )


def _html(body: str, status: int = 200) -> HTMLResponse:
    return HTMLResponse(body, status_code=status, headers=SECURITY_HEADERS)


def _to_sign_in() -> RedirectResponse:
    return RedirectResponse("/console/sign-in", status_code=303)


async def _operator(request: Request) -> Operator | None:
    return await operator_of(get_gateway(request).pool, request.cookies.get(COOKIE))


async def _page(request: Request, op: Operator, template: str, **context: Any) -> HTMLResponse:
    gw = get_gateway(request)
    async with tenant_transaction(gw.pool, SCOPE, op.tenant_id) as conn:
        live = await console_views.live_counts(conn, op.tenant_id)
    page = templates.get_template(template).render(
        op=op, live=live, notice=request.query_params.get("notice"), **context
    )
    return _html(page)


async def _check_csrf(request: Request, op: Operator) -> dict[str, Any]:
    form = dict(await request.form())
    cookie = session_secrets.parse(request.cookies.get(COOKIE))
    token = form.get("csrf")
    if cookie is None or not session_secrets.csrf_valid(cookie.secret, str(token or "")):
        raise PermissionError("csrf")
    return form


def _signature(handler: Callable[..., Any], taken: int) -> inspect.Signature:
    """The route's parameters as FastAPI reads them: the handler's, less the ``taken`` ones that
    follow ``request`` (the operator, the form), which the route supplies itself."""
    sig = inspect.signature(handler)
    params = list(sig.parameters.values())
    return sig.replace(parameters=params[:1] + params[1 + taken :])


def signed_in(
    handler: Callable[Concatenate[Request, Operator, ...], Awaitable[Response]],
) -> Callable[..., Awaitable[Response]]:
    """A page for a signed-in operator: without a session the browser is sent to sign in."""

    @functools.wraps(handler)
    async def route(request: Request, **kwargs: Any) -> Response:
        op = await _operator(request)
        if op is None:
            return _to_sign_in()
        return await handler(request, op, **kwargs)

    route.__signature__ = _signature(handler, 1)  # type: ignore[attr-defined]
    return route


def signed_form(
    handler: Callable[Concatenate[Request, Operator, dict[str, Any], ...], Awaitable[Response]],
) -> Callable[..., Awaitable[Response]]:
    """A form's POST for a signed-in operator: without a session the browser is sent to sign in,
    and a form without the session's CSRF token is refused with a 403."""

    @functools.wraps(handler)
    async def route(request: Request, **kwargs: Any) -> Response:
        op = await _operator(request)
        if op is None:
            return _to_sign_in()
        try:
            form = await _check_csrf(request, op)
        except PermissionError:
            return _html(CSRF_REFUSED, 403)
        return await handler(request, op, form, **kwargs)

    route.__signature__ = _signature(handler, 2)  # type: ignore[attr-defined]
    return route


@router.get("/console/sign-in")
async def sign_in_page(request: Request, link: str | None = None) -> Response:
    """The link's page asks for a click (a POST), so a mail scanner fetching it signs no one in."""
    body = templates.get_template("sign_in.html").render(link=link, error=None)
    return _html(body)


@router.post("/console/sign-in")
async def sign_in(request: Request) -> Response:
    gw = get_gateway(request)
    form = await request.form()
    cookie = await use_link(gw.pool, str(form.get("link") or ""))
    if cookie is None:
        error = "That sign-in link is not valid any more: links work once, for 15 minutes."
        return _html(templates.get_template("sign_in.html").render(link=None, error=error), 401)
    response = RedirectResponse("/console", status_code=303)
    _policy(gw).set(request, response, COOKIE, cookie, max_age=int(SESSION_TTL.total_seconds()),
                    samesite="strict")  # fmt: skip
    return response


@router.post("/console/sign-out")
async def sign_out_route(request: Request) -> Response:
    op = await _operator(request)
    if op is not None:
        try:
            await _check_csrf(request, op)
        except PermissionError:
            return _html(CSRF_REFUSED, 403)
        await sign_out(get_gateway(request).pool, op)
    response = _to_sign_in()
    _policy(get_gateway(request)).clear(request, response, COOKIE, samesite="strict")
    return response


def _graph_svg(graph: dict[str, Any], names: dict[uuid.UUID, str]) -> str:
    def name(ref: str | None) -> str:
        return names.get(parse_id("agt", ref), ref) if ref else "?"

    nodes = [(n["id"], name(n["id"])) for n in graph["nodes"]]
    edges = [(e["source"], e["target"], int(e["messages"])) for e in graph["edges"]]
    return charts.talk_graph(nodes, edges)


@router.get("/console")
@signed_in
async def overview(request: Request, op: Operator) -> Response:
    gw = get_gateway(request)
    now = datetime.now(UTC)
    try:
        latency: dict[str, Any] = await reads.latency(gw, op.tenant_id, now - timedelta(days=1),
                                                      now, None)  # fmt: skip
        graph = await reads.graph(gw, op.tenant_id, now - timedelta(days=7), now)
        async with tenant_transaction(gw.pool, SCOPE, op.tenant_id) as conn:
            names = await console_views.agent_names(conn, op.tenant_id)
        svg = _graph_svg(graph, names)
    except AgentBusError as exc:
        latency, svg = {"error": exc.detail, "slo_ms": gw.settings.delivery_slo_ms}, ""
    return await _page(request, op, "overview.html", title="Overview", nav="overview",
                       latency=latency, graph=svg)  # fmt: skip


@router.get("/console/agents")
@signed_in
async def agents_page(request: Request, op: Operator) -> Response:
    async with tenant_transaction(get_gateway(request).pool, SCOPE, op.tenant_id) as conn:
        rows = await console_views.agents_with_keys(conn, op.tenant_id)
    return await _page(request, op, "agents.html", title="Agents", nav="agents", agents=rows)


@router.get("/console/conversations")
@signed_in
async def conversations_page(request: Request, op: Operator) -> Response:
    async with tenant_transaction(get_gateway(request).pool, SCOPE, op.tenant_id) as conn:
        rows = await console_views.conversations(conn, op.tenant_id)
    for row in rows:
        row["ref"] = format_id("cnv", row["id"])
    return await _page(request, op, "conversations.html", title="Conversations",
                       nav="conversations", conversations=rows)  # fmt: skip


@router.get("/console/conversations/{ref}")
@signed_in
async def conversation_page(request: Request, op: Operator, ref: str) -> Response:
    gw = get_gateway(request)
    try:
        cnv = parse_id("cnv", ref)
    except ValueError:
        return _html("no such conversation", 404)
    async with tenant_transaction(gw.pool, SCOPE, op.tenant_id) as conn:
        messages = await console_views.conversation_messages(conn, op.tenant_id, cnv)
        names = await console_views.agent_names(conn, op.tenant_id)
    if not messages:
        return _html("no such conversation", 404)
    for m in messages:
        m["ref"] = format_id("msg", m["id"])
    chart = ""
    try:
        trace: dict[str, Any] = await reads.trace(gw, op.tenant_id, ref)
        rows = []
        for hop in trace["hops"]:
            hop["sender"] = names.get(parse_id("agt", hop["from_agent_id"]), "?")
            to = hop["to_agent_id"]
            hop["recipient"] = names.get(parse_id("agt", to), "?") if to else "-"
            rows.append((f"{hop['sender']} → {hop['recipient']}", 0.0,
                         float(hop["timings"]["total"])))  # fmt: skip
        offsets = _offsets(trace["hops"])
        chart = charts.timeline([(label, off, off + end) for (label, _s, end), off
                                 in zip(rows, offsets, strict=True)])  # fmt: skip
    except AgentBusError as exc:
        trace = {"error": exc.detail}
    title = f"Conversation {ref}"
    return await _page(request, op, "conversation.html", title=title, nav="conversations",
                       messages=messages, trace=trace, chart=chart)  # fmt: skip


def _offsets(hops: list[dict[str, Any]]) -> list[float]:
    """Each hop's start on the conversation's axis, from the gaps between hops."""
    out, at = [], 0.0
    for hop in hops:
        at += float(hop["gap_ms"] or 0)
        out.append(at)
    return out


@router.get("/console/tasks")
@signed_in
async def tasks_page(request: Request, op: Operator) -> Response:
    async with tenant_transaction(get_gateway(request).pool, SCOPE, op.tenant_id) as conn:
        rows = await console_views.tasks_by_state(conn, op.tenant_id)
    board = [(state, [t for t in rows if t["state"] == state]) for state in TASK_STATES]
    return await _page(request, op, "tasks.html", title="Tasks", nav="tasks", board=board)


@router.get("/console/dead-letters")
@signed_in
async def dead_letters_page(request: Request, op: Operator) -> Response:
    async with tenant_transaction(get_gateway(request).pool, SCOPE, op.tenant_id) as conn:
        rows = await console_views.dead_letters(conn, op.tenant_id)
    for row in rows:
        row["ref"] = format_id("msg", row["id"])
    return await _page(request, op, "dead_letters.html", title="Dead letters",
                       nav="dead-letters", letters=rows)  # fmt: skip


def console_token(op: Operator) -> VerifiedToken:
    """The signed-in user acting through the API's actions: an owner or admin acts with what
    an ``admin`` token of theirs could do, and the audit row says ``via: console``."""
    return VerifiedToken(op.session_id, op.tenant_id, None, op.user_id, "console",
                         frozenset({"admin", "read_audit"}), None)  # fmt: skip


@router.post("/console/dead-letters/{ref}/redrive")
@signed_form
async def redrive_page(request: Request, op: Operator, _form: dict[str, Any], ref: str) -> Response:
    client = (request.client.host if request.client else None, request.headers.get("user-agent"))
    try:
        await redrive.redrive_message(get_gateway(request), console_token(op), ref, client=client)
        notice = f"{ref} was redriven"
    except AgentBusError as exc:
        notice = f"{ref} was not redriven: {exc.detail}"
    return RedirectResponse(f"/console/dead-letters?notice={notice}", status_code=303)


@router.get("/console/usage")
@signed_in
async def usage_page(request: Request, op: Operator) -> Response:
    gw = get_gateway(request)
    now = datetime.now(UTC)
    since = now - timedelta(days=30)
    try:
        days = await reads.cost(gw, op.tenant_id, "day", since, now)
        by_agent = (await reads.cost(gw, op.tenant_id, "agent", since, now))["rows"]
        by_model = (await reads.cost(gw, op.tenant_id, "model", since, now))["rows"]
    except AgentBusError as exc:
        return await _page(request, op, "usage.html", title="Usage and cost", nav="usage",
                           error=exc.detail)  # fmt: skip
    per_day: dict[str, float] = {}
    for row in days["rows"]:
        per_day[row["key"]] = per_day.get(row["key"], 0.0) + float(row["cost_usd"])
    async with tenant_transaction(gw.pool, SCOPE, op.tenant_id) as conn:
        names = await console_views.agent_names(conn, op.tenant_id)
    for row in by_agent:
        row["name"] = names.get(parse_id("agt", row["key"]), row["key"])
    daily = charts.bar_chart(sorted(per_day.items()), unit=" USD")
    return await _page(request, op, "usage.html", title="Usage and cost", nav="usage",
                       daily=daily, by_agent=by_agent, by_model=by_model, error=None)  # fmt: skip
