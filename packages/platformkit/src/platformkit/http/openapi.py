"""How problems appear in OpenAPI: a ``Problem`` schema and ready-made ``responses=`` entries.

``create_app`` documents every 4XX and 5XX answer as ``application/problem+json`` with this
schema (which also stops FastAPI from documenting its own 422 shape, never sent here). A route
may add specific statuses with :func:`problem_responses`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi import FastAPI
from pydantic import BaseModel, ConfigDict, Field

from platformkit.http.problems import PROBLEM_MEDIA_TYPE

__all__ = [
    "OPERATIONAL_PATHS",
    "Problem",
    "document_routes_outside_fastapi",
    "operational_paths",
    "problem_responses",
]

OPERATIONAL_PATHS = ("/healthz", "/readyz", "/metrics")


class Problem(BaseModel):
    """RFC 9457 problem details, with a stable machine code and the request id."""

    model_config = ConfigDict(extra="allow")

    type: str = Field(description="URI identifying the kind of problem (built from code)")
    title: str = Field(description="Short summary of the kind of problem")
    status: int = Field(description="HTTP status code")
    detail: str | None = Field(default=None, description="What happened in this occurrence")
    code: str = Field(description="Stable machine-readable code, e.g. service_account.in_use")
    instance: str = Field(description="Path of the request that failed")
    request_id: str | None = Field(default=None, description="Id to quote when reporting it")


def problem_responses(*statuses: int | str, description: str = "Problem") -> dict[int | str, Any]:
    """``responses=`` entries documenting ``statuses`` (``404``, ``"4XX"``...) as problems."""
    schema = Problem.model_json_schema()
    entry = {"description": description, "content": {PROBLEM_MEDIA_TYPE: {"schema": schema}}}
    return dict.fromkeys(statuses, entry)


def operational_paths() -> dict[str, Any]:
    """OpenAPI path items of the routes :func:`platformkit.http.install` adds (``/healthz``,
    ``/readyz``, ``/metrics``), for a system that documents every route it serves."""
    status = {"type": "object", "properties": {"status": {"type": "string"}}}
    ready = {
        "type": "object",
        "properties": {
            "status": {"type": "string"},
            "checks": {"type": "object", "additionalProperties": {"type": "string"}},
        },
    }

    def get(summary: str, ok: dict[str, Any], *problems: int) -> dict[str, Any]:
        responses = {"200": ok, **{str(k): v for k, v in problem_responses(*problems).items()}}
        return {"get": {"tags": ["operations"], "summary": summary, "responses": responses}}

    def json_ok(schema: dict[str, Any]) -> dict[str, Any]:
        return {"description": "OK", "content": {"application/json": {"schema": schema}}}

    text = {"description": "Prometheus text format", "content": {"text/plain": {}}}
    return {
        "/healthz": get("The process is alive", json_ok(status)),
        "/readyz": get("The process can serve (its checks pass)", json_ok(ready), 503),
        "/metrics": get("Metrics", text),
    }


def document_routes_outside_fastapi(
    app: FastAPI, paths: Callable[[dict[str, Any]], dict[str, Any]]
) -> None:
    """Make ``app``'s OpenAPI document hold the routes FastAPI does not see: the path items
    ``paths(components)`` builds (plain Starlette routes, WebSockets as a GET answered 101), and
    the kernel's operational routes. Built once, on first use, as FastAPI's own."""
    generate = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            document = generate()  # kept by FastAPI as openapi_schema: updated in place
            extra = paths(document.setdefault("components", {})) | operational_paths()
            for path, item in extra.items():  # beside FastAPI's operations on the same path
                document["paths"].setdefault(path, {}).update(item)
        return app.openapi_schema or {}

    app.openapi = openapi  # type: ignore[method-assign]
