"""Hostile input to the agent list and the approvals read: NUL, integers past any column,
too many or malformed labels, a deep JSON or huge body sent anyway. Each is refused alone with
a 4xx problem, never a 500."""

from __future__ import annotations

import pytest
from fastapi import FastAPI
from strataplane.actions import tokens
from strataplane.testing import Seed, client_for

DEEP = "[" * 5000 + "]" * 5000


@pytest.mark.parametrize(
    ("method", "path", "body", "status"),
    [
        ("GET", "/api/v1/agents?label=a%3D%00b", None, 422),
        ("GET", "/api/v1/agents?version=%00", None, 422),
        ("GET", f"/api/v1/agents?limit={2**70}", None, 422),
        ("GET", "/api/v1/agents?after=not-a-uuid", None, 422),
        ("GET", "/api/v1/agents?label=novalue", None, 422),
        ("GET", "/api/v1/agents?" + "&".join(f"label=k{i}%3Dv" for i in range(21)), None, 422),
        ("GET", "/api/v1/agents?version=" + "9" * 65, None, 422),
        ("GET", "/api/v1/agents?health=fine", None, 422),
        ("GET", f"/api/v1/change-sets/{2**70}/approvals", None, 404),
        ("GET", "/api/v1/change-sets/%00/approvals", None, 422),
        ("GET", "/api/v1/agents", DEEP, 422),
        ("GET", "/api/v1/agents", "x" * (3 * 1024 * 1024), 413),
    ],
)
async def test_hostile_input_is_refused_alone(
    sp_app: FastAPI, method: str, path: str, body: str | None, status: int
) -> None:
    seed = Seed(sp_app.state.services)
    tenant, admin = await seed.tenant()
    token = (await tokens.create_token(seed.ctx(admin, tenant.id), "t")).plaintext
    headers = {"Content-Type": "application/json"} if body else {}
    async with client_for(sp_app, token) as http:
        answer = await http.request(method, path, content=body, headers=headers)
        assert answer.status_code == status, answer.text
        assert answer.headers["content-type"].startswith("application/problem+json")
        assert (await http.get("/api/v1/agents")).status_code == 200  # the next one is served
