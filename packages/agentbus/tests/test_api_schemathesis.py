"""Requests generated from the OpenAPI document (schemathesis: valid ones, and ones that break
the document), sent with the tenant's owner token on management routes and an agent's
credential on the hot routes: no answer is a 5xx, and each conforms to the document (status,
media type, schema)."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from agentbus.gateway.config import GatewaySettings
from agentbus.gateway.context import Gateway
from agentbus.gateway.testkit import alice_and_bob
from platformkit.testing.apifuzz import generate, send
from schemathesis import Case

pytestmark = pytest.mark.long_module  # minutes: run first (platformkit.testing.plugin)

# The hot routes an agent credential opens (04-API-SPEC §4-§9).
AGENT_ROUTES = ("/v1/messages", "/v1/inbox", "/v1/tasks", "/v1/blobs")


@pytest.fixture
def gateway_settings(gateway_settings: GatewaySettings, tmp_path: Path) -> GatewaySettings:
    """With analytics (chDB), so that their routes answer for real."""
    return gateway_settings.model_copy(update={"analytics": True, "analytics_dir": tmp_path / "ch"})


# Several hundred generated requests: minutes on a busy machine, so a ceiling well above them.
@pytest.mark.timeout(900)
async def test_generated_requests_get_documented_answers(
    gateway: Gateway, gateway_client: httpx.AsyncClient
) -> None:
    world, alice, _bob = await alice_and_bob(gateway, gateway_client)
    document = (await gateway_client.get("/v1/openapi.json")).json()
    cases = generate(document, max_examples=10)
    for case in cases:  # a long-poll would hold each request up to 30 s: answer at once
        query = case.query if isinstance(case.query, dict) else {}
        if case.path == "/v1/inbox" and isinstance(query.get("wait_s", 0), int):
            case.query = {**query, "wait_s": 0}

    def credentials(case: Case) -> dict[str, str]:
        hot = case.path.startswith(AGENT_ROUTES) or case.path.endswith("/heartbeat")
        return alice.headers() if hot else {"Authorization": f"Bearer {world.token}"}

    found = await send(gateway_client, cases, credentials)
    assert not found.failures, "\n".join(found.failures)
    assert found.sent > 300, found.sent
