"""Hostile input to the management API: integers past the columns' range are refused with a
422 naming the parameter, never a 500 from the database."""

from __future__ import annotations

import pytest
from fastapi import FastAPI
from strataplane.actions import tokens
from strataplane.testing import Seed, client_for

PAST_BIGINT = str(2**63)


@pytest.mark.parametrize(
    ("method", "path", "body", "field"),
    [
        ("GET", f"/api/v1/change-sets?before={PAST_BIGINT}", None, "before"),
        ("GET", f"/api/v1/audit/events?before={PAST_BIGINT}", None, "before"),
        ("GET", f"/api/v1/spec/revisions?before={PAST_BIGINT}", None, "before"),
        ("GET", f"/api/v1/spec/revisions/{PAST_BIGINT}", None, "number"),
        ("GET", f"/api/v1/spec/revisions/{PAST_BIGINT}/tree", None, "number"),
        ("GET", f"/api/v1/spec/diff?from=1&to={PAST_BIGINT}", None, "to"),
        ("POST", "/api/v1/change-sets/revert", {"revision": 2**70}, "revision"),
        ("POST", "/api/v1/change-sets/restore", {"revision": 2**70}, "revision"),
        ("POST", "/api/v1/enrollment-tokens", {"name": "x", "max_uses": 2**31}, "max_uses"),
    ],
)
async def test_integers_past_their_column_are_refused(
    sp_app: FastAPI, method: str, path: str, body: object, field: str
) -> None:
    seed = Seed(sp_app.state.services)
    tenant, admin = await seed.tenant()
    token = (await tokens.create_token(seed.ctx(admin, tenant.id), "t")).plaintext
    async with client_for(sp_app, token) as http:
        answer = await http.request(method, path, json=body)
    assert answer.status_code == 422, answer.text
    problem = answer.json()
    assert problem["code"] == "validation_failed"
    assert field in [e["field"].split(".")[-1] for e in problem["errors"]]
