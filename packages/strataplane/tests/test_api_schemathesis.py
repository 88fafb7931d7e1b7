"""Requests generated from the OpenAPI document (schemathesis: valid ones, and ones that break
the document), sent as a tenant's admin, on the platform's routes as a platform admin and on
the agents' endpoints with an enrolled agent's credential: no
answer is a 5xx, and each conforms to the document (status, media type, schema)."""

from __future__ import annotations

import pytest
from fastapi import FastAPI
from platformkit.testing.apifuzz import generate, send
from schemathesis import Case
from strataplane.actions import tokens
from strataplane.simulate.seed import publish
from strataplane.testing import PASSWORD, Seed, client_for

# A released configuration, so the agent's configuration URL has one to answer with (without
# one it answers 503 with Retry-After, as Telegraf expects).
FILES = {
    "layers/base.toml": 'agentKind = "telegraf"\nowner = "p"\nroutes = ["out"]\n\n'
    "[config.inputs.cpu.default]\npercpu = false\n",
    "routes/out.toml": 'agentKind = "telegraf"\nowner = "p"\n\n'
    '[config.outputs.file.main]\nfiles = ["stdout"]\n',
}
# A logout ends the credential the rest of the run uses.
SKIPPED = {("POST", "/api/v1/auth/logout"), ("DELETE", "/api/v1/auth/session")}


# Several hundred generated requests: minutes on a busy machine, so a ceiling well above them.
@pytest.mark.timeout(900)
async def test_generated_requests_get_documented_answers(sp_app: FastAPI) -> None:
    seed = Seed(sp_app.state.services)
    tenant, admin = await seed.tenant()
    token = (await tokens.create_token(seed.ctx(admin, tenant.id), "fuzz")).plaintext
    await seed.user("fuzz-root", platform_admin=True)
    await publish(sp_app.state.services.pool, tenant.id, FILES)
    async with client_for(sp_app) as http:
        document = (await http.get("/api/v1/openapi.json")).json()
        signed_in = await http.post(
            "/api/v1/auth/login",
            json={"username": "fuzz-root", "password": PASSWORD, "platform": True},
        )
        assert signed_in.status_code == 200, signed_in.text
        platform = {
            "Cookie": "; ".join(f"{k}={v}" for k, v in signed_in.cookies.items()),
            "X-CSRF-Token": signed_in.json()["csrf_token"],
        }
    async with client_for(sp_app, token) as http:
        enrollment = await http.post("/api/v1/enrollment-tokens", json={"name": "fuzz"})
    async with client_for(sp_app, enrollment.json()["token"]) as http:
        enrolled = await http.post(
            "/api/v1/enroll/telegraf", json={"instance_id": "fuzz-1", "hostname": "fuzz-1"}
        )
        assert enrolled.status_code == 201, enrolled.text
    agent = {"Authorization": f"Bearer {enrolled.json()['credential']}"}
    cases = generate(document, max_examples=8, skip=lambda m, p: (m, p) in SKIPPED)

    def credentials(case: Case) -> dict[str, str]:
        if case.path.startswith("/api/v1/platform/"):
            return platform
        if case.path.startswith("/agents/"):
            return agent
        return {"Authorization": f"Bearer {token}"}

    async with client_for(sp_app) as http:
        found = await send(http, cases, credentials)
    assert not found.failures, "\n".join(found.failures)
    assert found.sent > 300, found.sent
