"""``POST /v1/usage`` (04-API-SPEC §9), a plain Starlette route for the sidecars' uploads.

The kernel's guard leaves this body's JSON to the route (``JSON_GUARD_EXEMPT``), so a record with
NUL, a lone surrogate or an integer past 64 bits is refused alone, as an item of a send batch is.
The request fails whole only when the body is not ``{"records": [...]}`` with 1 to 500 records
(AB-8001, AB-5009 past 500), is over 1 MiB (AB-5002) or nests past 32 levels (AB-8001); and with
AB-8001 listing every refusal when no record could be stored. Otherwise ``202`` with
``accepted``, ``duplicates`` and ``refused`` (each ``{index, id, status, problem}``).
"""

from __future__ import annotations

from typing import Any

from platformkit import boundedjson
from platformkit.http import FastJSONResponse, problem_body
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from agentbus.errors import RequestInvalid
from agentbus.gateway.api.auth import authenticate_agent
from agentbus.gateway.api.bodies import MAX_DEPTH, read_capped
from agentbus.gateway.context import get_gateway
from agentbus.gateway.domain.errors import BatchTooLarge
from agentbus.usage.actions import BATCH_MAX, record_usage

BODY_MAX = 1024 * 1024
PATH = "/v1/usage"


def _records(raw: bytes) -> list[Any]:
    try:
        data = boundedjson.loads(raw or b"{}", max_depth=MAX_DEPTH)
    except boundedjson.JsonRefused as exc:
        raise RequestInvalid(f"the body is refused: {exc.reason}") from None
    records = data.get("records") if isinstance(data, dict) else None
    if not isinstance(records, list) or set(data) != {"records"} or not records:
        raise RequestInvalid('the body is {"records": [record, ...]} with at least one record',
                             field="/records")  # fmt: skip
    if len(records) > BATCH_MAX:
        raise BatchTooLarge(f"at most {BATCH_MAX} records per request", limit=BATCH_MAX)
    return records


async def post_usage(request: Request) -> Response:
    gw = get_gateway(request)
    who = await authenticate_agent(gw, request)
    records = _records(await read_capped(request, BODY_MAX))
    outcome = await record_usage(gw, who, records)
    refused = [
        {"index": index, "id": ident, "status": problem.status,
         "problem": problem_body(problem, PATH)}
        for index, ident, problem in sorted(outcome.refused, key=lambda r: r[0])
    ]  # fmt: skip
    if refused and outcome.accepted + outcome.duplicates == 0:
        raise RequestInvalid("no record could be stored", refused=refused)
    body = {"accepted": outcome.accepted, "duplicates": outcome.duplicates, "refused": refused}
    return FastJSONResponse(body, status_code=202)


routes = [Route(PATH, post_usage, methods=["POST"])]
