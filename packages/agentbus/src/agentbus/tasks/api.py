"""Task routes (04-API-SPEC.md §6), plain Starlette routes that the app puts on its own router
ahead of the included FastAPI routers, as the delivery routes.

The verbs are typed forms of ``POST /v1/messages``: each accepts only its envelope type
(AB-2003 otherwise), ``/{tsk}/...`` also requires ``subject`` to be the path's task, and the
answer is the send's, with ``task`` carrying the new state. Reads are for the parties.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from agentbus.errors import NotFound, RequestInvalid
from agentbus.gateway.actions.send import send_envelope
from agentbus.gateway.api.auth import authenticate_agent
from agentbus.gateway.api.send import authenticate_sender, read_send_body, send_response
from agentbus.gateway.context import get_gateway
from agentbus.tasks import reads
from agentbus.tasks.domain import REQUEST_TYPE, VERB_EVENTS
from agentbus.tasks.hooks import TaskService


def _rules(request: Request) -> TaskService:
    gw = get_gateway(request)
    return gw.task_rules if isinstance(gw.task_rules, TaskService) else TaskService(gw)


async def _send(request: Request, expected_type: str, subject: str | None) -> Response:
    gw = get_gateway(request)
    who = await authenticate_sender(gw, request)
    raw = await read_send_body(request)
    result = await send_envelope(
        gw, who, raw, request.headers.get("content-type"), task_rules=_rules(request),
        expected_type=expected_type, expected_subject=subject,
    )  # fmt: skip
    return send_response(gw, who, result)


async def post_task(request: Request) -> Response:
    return await _send(request, REQUEST_TYPE, None)


async def post_verb(request: Request) -> Response:
    verb, task = request.path_params["verb"], request.path_params["task_id"]
    if verb not in VERB_EVENTS:
        raise NotFound(f"no task verb {verb!r}")
    return await _send(request, f"agentbus.task.{verb}.v1", task)


async def get_task(request: Request) -> Response:
    gw = get_gateway(request)
    who = await authenticate_agent(gw, request)
    return JSONResponse(await reads.read_task(gw.pool, who, request.path_params["task_id"]))


async def get_transitions(request: Request) -> Response:
    gw = get_gateway(request)
    who = await authenticate_agent(gw, request)
    items = await reads.read_transitions(gw.pool, who, request.path_params["task_id"])
    return JSONResponse(items)


async def list_tasks(request: Request) -> Response:
    gw = get_gateway(request)
    who = await authenticate_agent(gw, request)
    query = request.query_params
    limit = query.get("limit", "50")
    if not limit.isdigit():
        raise RequestInvalid("limit must be an integer", field="limit")
    page = await reads.list_tasks(
        gw.pool, who, role=query.get("role"), state=query.get("state"),
        capability=query.get("capability"), limit=int(limit), cursor=query.get("cursor"),
    )  # fmt: skip
    return JSONResponse(page)


routes = [
    Route("/v1/tasks", post_task, methods=["POST"]),
    Route("/v1/tasks", list_tasks, methods=["GET"]),
    Route("/v1/tasks/{task_id}", get_task, methods=["GET"]),
    Route("/v1/tasks/{task_id}/transitions", get_transitions, methods=["GET"]),
    Route("/v1/tasks/{task_id}/{verb}", post_verb, methods=["POST"]),
]
