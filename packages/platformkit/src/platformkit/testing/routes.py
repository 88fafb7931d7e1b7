"""The routes an app really serves, for tests that hold them against its OpenAPI document: its
own routes, the routes of every included router (FastAPI keeps them behind router entries), plain
Starlette routes and WebSockets (as a GET, the upgrade request). Mounted apps (static files) are
not routes of the API."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from starlette.routing import Mount, Route, WebSocketRoute

__all__ = ["Served", "served_routes"]


@dataclass(frozen=True)
class Served:
    method: str  # lower case, as OpenAPI path items name operations
    path: str
    in_schema: bool  # False: the route says it is not part of the API (HTML pages)


_CONVERTER = re.compile(r"\{(\w+):\w+\}")


def _walk(routes: Iterable[Any]) -> Iterable[Served]:
    for route in routes:
        if isinstance(route, Mount):
            continue
        if hasattr(route, "effective_candidates"):  # a router included by FastAPI
            yield from _walk(route.effective_candidates())
        elif isinstance(route, WebSocketRoute):
            yield Served("get", _CONVERTER.sub(r"{\1}", route.path), True)
        elif isinstance(route, Route) or hasattr(route, "original_route"):
            in_schema = bool(getattr(route, "include_in_schema", True))
            path = _CONVERTER.sub(r"{\1}", route.path)  # {path:path} is {path} in OpenAPI
            for method in sorted(set(route.methods or ()) - {"HEAD"} or {"GET"}):
                yield Served(method.lower(), path, in_schema)


def served_routes(app: Any) -> list[Served]:
    """Every (method, path) ``app`` answers, once each."""
    return sorted(set(_walk(app.routes)), key=lambda s: (s.path, s.method))


def undocumented(app: Any, document: dict[str, Any], skip: Any = lambda _s: False) -> list[str]:
    """``METHOD path`` of each route ``app`` serves that ``document`` lacks (``skip`` spares
    the routes a test names with its reasons)."""
    paths = document["paths"]
    return [
        f"{s.method.upper()} {s.path}"
        for s in served_routes(app)
        if s.method not in paths.get(s.path, {}) and not skip(s)
    ]


def without_schemas(document: dict[str, Any]) -> list[str]:
    """Operations of ``document`` with a request body or an answer's content lacking a schema
    (a media type with no schema at all, text/plain for one, is a documented free form)."""
    found = []
    for path, item in document["paths"].items():
        for method, operation in item.items():
            where = f"{method.upper()} {path}"
            for status, response in operation.get("responses", {}).items():
                for media, content in response.get("content", {}).items():
                    if content and "schema" not in content:
                        found.append(f"{where} {status} {media}")
            for media, content in operation.get("requestBody", {}).get("content", {}).items():
                if "schema" not in content:
                    found.append(f"{where} request {media}")
            if not operation.get("responses"):
                found.append(f"{where}: no responses")
    return found
