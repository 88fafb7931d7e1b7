"""Every route the server answers is in its OpenAPI document, with a request schema where it
takes a body and a response schema for each answer: FastAPI's routes, the agents' endpoints
served ahead of FastAPI, and the kernel's operational routes."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from starlette.routing import Route
from strataplane.testing import client_for

DOCUMENTATION = {"/api/v1/openapi.json", "/api/v1/docs", "/docs/oauth2-redirect"}


def _served(app: FastAPI) -> dict[str, set[str]]:
    served: dict[str, set[str]] = {}
    for route in app.routes:
        if isinstance(route, Route) and route.path not in DOCUMENTATION:
            methods = set(route.methods or ()) - {"HEAD"} or {"GET"}
            served.setdefault(route.path, set()).update(m.lower() for m in methods)
    for path, endpoint in app.front.endpoints.items():  # type: ignore[attr-defined]
        served.setdefault(path, set()).update(m.lower() for m in endpoint.methods)
    return served


async def test_every_route_is_documented_with_schemas(sp_app: FastAPI) -> None:
    async with client_for(sp_app) as http:
        document: dict[str, Any] = (await http.get("/api/v1/openapi.json")).json()
    paths = document["paths"]
    missing = [
        f"{method.upper()} {path}"
        for path, methods in _served(sp_app).items()
        for method in methods
        if method not in paths.get(path, {})
    ]
    assert missing == []
    for path, item in paths.items():
        for method, operation in item.items():
            where = f"{method.upper()} {path}"
            for status, response in operation["responses"].items():
                if method == "head" or status in {"204", "202"} or "content" not in response:
                    continue
                for media in response["content"].values():
                    if media:
                        assert "schema" in media, f"{where} {status}"
            if method in {"post", "put", "patch"} and "requestBody" in operation:
                for media in operation["requestBody"]["content"].values():
                    assert "schema" in media, where
