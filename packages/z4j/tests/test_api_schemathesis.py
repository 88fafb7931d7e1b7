"""Requests generated from the OpenAPI document (schemathesis: valid ones, and ones that break
the document), sent with an administrator's session: no answer is a 5xx, and each conforms to
the document (status, media type, schema). The agent channel's HTTP routes get the agent's
bearer token."""

from __future__ import annotations

import pytest
from platformkit.testing.apifuzz import generate, send
from schemathesis import Case

from .conftest import Seed

# A logout ends the session the rest of the run uses.
SKIPPED = {("POST", "/api/v1/auth/logout")}


# Several hundred generated requests: minutes on a busy machine, so a ceiling well above them.
@pytest.mark.timeout(900)
async def test_generated_requests_get_documented_answers(seed: Seed) -> None:
    admin = await seed.user("fuzz@example.com", is_admin=True)
    project = await seed.project(admin, "fuzz")
    agent = await seed.agent(admin, project)
    seed.tasks(project, [{}, {}])
    async with seed.signed_in("fuzz@example.com") as http:
        document = (await http.get("/api/v1/openapi.json")).json()
        cases = generate(document, max_examples=10, skip=lambda m, p: (m, p) in SKIPPED)

        def credentials(case: Case) -> dict[str, str]:
            if case.path.startswith("/api/v1/agent/"):
                return {"Authorization": f"Bearer {agent.token}"}
            return {}

        found = await send(http, cases, credentials)
    assert not found.failures, "\n".join(found.failures)
    assert found.sent > 100, found.sent
