"""Every route the gateway serves is in its OpenAPI document with schemas: the management API,
the agents' hot routes served ahead of FastAPI (sends and batches, the inbox and its
settlements, the delivery WebSocket as the GET that upgrades, tasks, blobs, heartbeats) and the
kernel's operational routes. The console's HTML pages, form posts, event stream and static
files are not API and are left out, by the rule below."""

from __future__ import annotations

import httpx
from agentbus.gateway.app import create_app
from agentbus.gateway.config import GatewaySettings
from platformkit.testing.routes import Served, undocumented, without_schemas

DOCUMENT = "/v1/openapi.json"
DOCS_PAGE = "/v1/docs"  # the document itself, as a page


def _console(route: Served) -> bool:
    """A console page: under /console/ and declared out of the schema by its router."""
    return (route.path == "/console" or route.path.startswith("/console/")) and not route.in_schema


def test_every_route_is_documented_with_schemas(gateway_settings: GatewaySettings) -> None:
    app = create_app(gateway_settings)
    document = app.openapi()
    assert (
        undocumented(app, document, lambda s: s.path in (DOCUMENT, DOCS_PAGE) or _console(s)) == []
    )
    assert without_schemas(document) == []
    send = document["paths"]["/v1/messages"]["post"]
    assert send["requestBody"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/Envelope"
    }
    assert "101" in document["paths"]["/v1/inbox/ws"]["get"]["responses"]


async def test_the_docs_page_is_served_from_the_gateway_itself(
    gateway_settings: GatewaySettings,
) -> None:
    transport = httpx.ASGITransport(app=create_app(gateway_settings))
    async with httpx.AsyncClient(transport=transport, base_url="http://gw") as http:
        page = await http.get(DOCS_PAGE)
    assert page.status_code == 200
    assert "/v1/messages" in page.text
    assert "<script" not in page.text.lower()
