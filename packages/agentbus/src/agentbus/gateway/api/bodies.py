"""Request bodies of the JSON routes: size cap, a bounded JSON parse (``MAX_DEPTH``), what
PostgreSQL could not store, then a pydantic model, every failure an AB code (AB-5002 over the
cap, AB-8001 otherwise, with JSON Pointers in ``errors``).

The kernel's request guard checks every request before these routes run (bodies past the
gateway's limits, unstorable text in a path, a query or a JSON body, JSON nested past its
depth); :func:`guard_problem` gives its refusals the same AB codes and shape."""

from __future__ import annotations

from typing import Any

from platformkit import boundedjson
from platformkit.http import ContentTooLarge, ProblemError
from platformkit.storable import find_unstorable
from pydantic import BaseModel, ConfigDict, ValidationError
from starlette.requests import Request

from agentbus.errors import AgentBusError, RequestInvalid
from agentbus.gateway.domain.errors import RequestTooLarge

MANAGEMENT_BODY_MAX = 65536
MAX_DEPTH = 32


class Body(BaseModel):
    """Base of request bodies: unknown members are refused, never ignored."""

    model_config = ConfigDict(extra="forbid", strict=True)


async def read_capped(
    request: Request, limit: int, too_large: type[AgentBusError] = RequestTooLarge
) -> bytes:
    """The body, refused with ``too_large`` (AB-5002 by default) once it passes ``limit``
    bytes, by its ``Content-Length`` before reading or while reading."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise too_large(f"the body is over {limit} bytes", limit=limit)
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise too_large(f"the body is over {limit} bytes", limit=limit)
        chunks.append(chunk)
    return b"".join(chunks)


def _pointer(loc: tuple[Any, ...]) -> str:
    return "/" + "/".join(str(part) for part in loc)


def parse_model[M: BaseModel](model: type[M], raw: bytes) -> M:
    try:
        data = boundedjson.loads(raw or b"{}", max_depth=MAX_DEPTH)
    except boundedjson.JsonRefused as exc:
        raise RequestInvalid(f"the body is refused: {exc.reason}") from None
    unstorable = find_unstorable(data)
    if unstorable is not None:
        error = {"field": unstorable.path, "reason": unstorable.reason}
        raise RequestInvalid(f"{unstorable}", field=unstorable.path, errors=[error])
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        errors = [{"pointer": _pointer(e["loc"]), "reason": e["msg"]} for e in exc.errors()]
        raise RequestInvalid(f"{len(errors)} invalid field(s)", errors=errors) from None


async def read_model[M: BaseModel](
    request: Request, model: type[M], limit: int = MANAGEMENT_BODY_MAX
) -> M:
    return parse_model(model, await read_capped(request, limit))


def guard_problem(error: ProblemError) -> ProblemError:
    """The kernel guard's refusal as the gateway's: AB-5002 for a body over its limit, AB-8001
    naming the field (``field``, and ``errors`` of ``{field, reason}``) for the rest."""
    if isinstance(error, ContentTooLarge):
        return RequestTooLarge(error.detail, limit=error.data["limit"])
    errors = [{"field": e["field"], "reason": e["msg"]} for e in error.data.get("errors", ())]
    field = errors[0]["field"] if errors else None
    return RequestInvalid(
        f"{field or 'the request'}: {errors[0]['reason']}" if errors else error.detail,
        field=field,
        errors=errors,
    )
