"""The access log and the HTTP metrics name the inbox and task routes by their templates, not
``unmatched``: they are plain routes on an included router, which FastAPI does not record in the
request scope, and the kernel finds them by their endpoint (``platformkit.http.metrics``)."""

from __future__ import annotations

import logging

import httpx
import pytest
from agentbus.gateway.context import Gateway
from agentbus.gateway.testkit import enroll, make_world


async def test_inbox_and_task_routes_are_labelled_by_template(
    gateway: Gateway, gateway_client: httpx.AsyncClient, caplog: pytest.LogCaptureFixture
) -> None:
    acme = await make_world(gateway, "acme")
    bob = await enroll(gateway_client, acme, "bob")
    caplog.set_level(logging.INFO, logger="platformkit.http.access")
    client = gateway_client
    assert (await client.get("/v1/inbox?wait_s=0", headers=bob.headers())).status_code == 200
    reply = await client.post("/v1/inbox/read", json={"reads": []}, headers=bob.headers())
    assert reply.status_code in (200, 400, 422), reply.text
    assert (await client.get("/v1/tasks/tsk_nope", headers=bob.headers())).status_code >= 400
    routes = [getattr(r, "route", None) for r in caplog.records if r.name.endswith("access")]
    assert routes[-3:] == ["/v1/inbox", "/v1/inbox/read", "/v1/tasks/{task_id}"]
