"""The cross-tenant probe: every GET route of the OpenAPI document (the hot routes included),
called with another tenant's owner token and agent credential on this tenant's ids, answers
404 for a path naming one, and lists show none of this tenant's ids.

Routes are read from the document, so a new route is probed as soon as it exists; a path
parameter the probe has no id for fails the test until ``_victim`` learns it."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import httpx
import pytest
from agentbus.analytics.ingest import Ingester
from agentbus.gateway.config import GatewaySettings
from agentbus.gateway.context import Gateway
from agentbus.gateway.testkit import (
    TRACEPARENT,
    alice_and_bob,
    enroll,
    make_world,
    post_envelope,
)

# Not tenant data: the gateway's public keys, operational routes, and the delivery WebSocket
# (not an HTTP answer; test_delivery_isolation covers another tenant's socket and settlements).
SKIPPED = re.compile(r"^/\.well-known/|^/(healthz|readyz|metrics)$|^/v1/inbox/ws$")
# A trace id is chosen by senders, not owned by a tenant: its route is a filter, a list of what
# the caller may see (none of this tenant's messages).
FILTERS = {"/v1/traces/{trace_id}"}


@pytest.fixture
def gateway_settings(gateway_settings: GatewaySettings, tmp_path: Path) -> GatewaySettings:
    """With analytics (chDB), so that their routes are probed for real."""
    return gateway_settings.model_copy(update={"analytics": True, "analytics_dir": tmp_path / "ch"})


def _ok(response: httpx.Response, status: int = 200) -> Any:
    assert response.status_code == status, response.text
    return response.json()


async def _victim(gw: Gateway, http: httpx.AsyncClient) -> tuple[dict[str, str], set[str]]:
    """A tenant with one of everything; its ids by path parameter, and every id it holds."""
    world, alice, bob = await alice_and_bob(gw, http)
    owner = {"Authorization": f"Bearer {world.token}"}
    sent = await post_envelope(http, alice, alice.envelope(bob.address, {"text": "hi"}))
    msg_id = sent["message"]["id"]
    task = await post_envelope(
        http,
        alice,
        alice.task_request(bob.address, "probe-1", {"instructions": "review"}),
        "/v1/tasks",
    )
    blob = _ok(
        await http.post(
            "/v1/blobs",
            content=b"victim bytes",
            headers={**alice.headers(), "Content-Type": "text/plain"},
        ),
        201,
    )
    assert gw.analytics is not None
    await Ingester(gw.pool, gw.analytics).run_once()  # the analytics hold its events too
    tokens = _ok(await http.get("/v1/tokens", headers=owner))
    users = _ok(await http.get("/v1/users", headers=owner))
    policies = _ok(await http.get("/v1/policies", headers=owner))
    ids = {
        "tenant_id": str(world.tenant_id),
        "workspace_id": str(world.workspace_id),
        "agent_id": alice.agent_id,
        "msg_id": msg_id,
        "task_id": task["task"]["id"],
        "blob_id": blob["id"],
        "conversation_id": sent["message"]["conversation"],
        "receipt_id": sent["receipt"]["id"],
        "trace_id": TRACEPARENT.split("-")[1],
        "token_id": tokens["items"][0]["id"],
        "user_id": users["items"][0]["id"],
        "policy_id": policies["items"][0]["id"],
    }
    held = {v for k, v in ids.items() if k != "trace_id"} | {bob.agent_id}
    return ids, held


async def test_other_tenants_see_nothing_of_this_one(
    gateway: Gateway, gateway_client: httpx.AsyncClient
) -> None:
    http = gateway_client
    ids, held = await _victim(gateway, http)
    other = await make_world(gateway, "other")
    carol = await enroll(http, other, "carol")
    credentials = {"owner": {"Authorization": f"Bearer {other.token}"}, "agent": carol.headers()}
    document = (await http.get("/v1/openapi.json")).json()
    probed, problems = 0, []
    for path, item in sorted(document["paths"].items()):
        operation = item.get("get")
        if operation is None or SKIPPED.search(path):
            continue
        params = [p["name"] for p in operation.get("parameters", []) if p["in"] == "path"]
        owned = bool(params) and path not in FILTERS
        missing = [p for p in params if p not in ids]
        assert not missing, f"{path}: the probe has no id for {missing}"
        url = path
        for name in params:
            url = url.replace("{" + name + "}", ids[name])
        query = {"wait_s": "0"} if path == "/v1/inbox" else {}
        statuses = {}
        for who, headers in credentials.items():
            answer = await http.get(url, params=query, headers=headers)
            probed += 1
            statuses[who] = answer.status_code
            if 200 <= answer.status_code < 300 and owned:
                problems.append(f"GET {url} as {who}: {answer.status_code}")
            shown = answer.text
            if answer.headers.get("content-type", "").endswith("json"):
                body = answer.json()
                if isinstance(body, dict):
                    body.pop("instance", None)  # the problem names the path asked for
                shown = json.dumps(body)
            # an id the caller sent, echoed in the problem's detail, tells nothing
            leaked = sorted(i for i in held if i in shown and i not in url)
            if leaked:
                problems.append(f"GET {url} as {who} shows {leaked}")
        if owned and 404 not in statuses.values():
            problems.append(f"GET {url}: {statuses} (expected 404 with the credential it takes)")
    assert problems == [], "\n".join(problems)
    assert probed >= 50
