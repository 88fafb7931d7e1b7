"""Every route the brain serves is in its OpenAPI document with schemas: the REST API, the agent
channel (its WebSocket as the GET that upgrades, and the HTTP fallback, both served outside
FastAPI) and the kernel's operational routes. The dashboard's HTML pages and form posts are not
API and are left out, by the rule below."""

from __future__ import annotations

import httpx
from platformkit.http.openapi import OPERATIONAL_PATHS
from platformkit.testing.routes import Served, served_routes, undocumented, without_schemas
from z4j.app import create_app

DOCUMENT = "/api/v1/openapi.json"
DOCS_PAGE = "/api/v1/docs"  # the document itself, as a page


def _dashboard(route: Served) -> bool:
    """An HTML page or form post of the dashboard: outside /api/ and /ws/, not operational,
    and declared out of the schema by its router."""
    api = route.path.startswith(("/api/", "/ws/")) or route.path in OPERATIONAL_PATHS
    return not api and not route.in_schema


def test_every_route_is_documented_with_schemas() -> None:
    app = create_app()
    document = app.openapi()
    spared = (DOCUMENT, DOCS_PAGE)
    assert undocumented(app, document, lambda s: s.path in spared or _dashboard(s)) == []
    assert without_schemas(document) == []


def test_the_rule_spares_only_dashboard_pages() -> None:
    spared = [s.path for s in served_routes(create_app()) if _dashboard(s)]
    assert spared
    assert all(not p.startswith(("/api", "/ws")) for p in spared)


async def test_the_docs_page_is_served_from_the_brain_itself(client: httpx.AsyncClient) -> None:
    page = await client.get(DOCS_PAGE)
    assert page.status_code == 200
    assert "/api/v1/projects" in page.text
    assert "<script" not in page.text.lower()
