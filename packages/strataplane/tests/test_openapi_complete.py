"""Every route the server answers is in its OpenAPI document, with a request schema where it
takes a body and a response schema for each answer: FastAPI's routes, the agents' endpoints
served ahead of FastAPI, and the kernel's operational routes. The console's HTML pages and
form posts (outside /api/, declared out of the schema) are not API."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from platformkit.testing.routes import served_routes
from strataplane.testing import client_for

DOCUMENTATION = {"/api/v1/openapi.json", "/api/v1/docs"}


def _served(app: FastAPI) -> dict[str, set[str]]:
    served: dict[str, set[str]] = {}
    for route in served_routes(app):  # included routers' routes too
        console_page = not route.in_schema and not route.path.startswith("/api/")
        if route.path not in DOCUMENTATION and not console_page:
            served.setdefault(route.path, set()).add(route.method)
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


async def test_the_docs_page_is_ours_and_loads_nothing_from_elsewhere(sp_app: FastAPI) -> None:
    async with client_for(sp_app) as http:
        answer = await http.get("/api/v1/docs")
    assert answer.status_code == 200
    page = answer.text
    assert 'id="tag-change-sets"' in page  # every tag's operations, grouped
    assert "/api/v1/change-sets/{ref}/merge" in page
    assert "application/problem+json</code>: <span class=t>Problem (object)" in page
    assert "<script" not in page.lower()
    assert "cdn" not in page.lower()
