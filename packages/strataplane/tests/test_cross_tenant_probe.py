"""The cross-tenant probe: every list and get route of the OpenAPI document, called by another
tenant's admin with this tenant's ids, answers 404 and lists none of this tenant's rows.

Routes are read from the document, so a new route is probed as soon as it exists; a path
parameter the probe has no id for fails the test until ``_ids`` learns it."""

from __future__ import annotations

import json
import re
from typing import Any

from fastapi import FastAPI
from platformkit.testing.pki import issue
from strataplane.actions import tokens
from strataplane.simulate.seed import publish
from strataplane.testing import PASSWORD, Seed, client_for

FILES = {
    "layers/base.toml": 'agentKind = "telegraf"\nowner = "p"\nroutes = ["out"]\n\n'
    "[config.inputs.cpu.default]\npercpu = false\n",
    "routes/out.toml": 'agentKind = "telegraf"\nowner = "p"\n\n'
    '[config.outputs.file.main]\nfiles = ["stdout"]\n',
    "secrets/DB_PASS.toml": 'owner = "p"\n\n[grant]\n',
}
# Not tenant routes: the platform's (platform credentials only), one's own session and
# invitations, agents' endpoints (their credential names the agent), operational routes.
# the catalog's plugin schemas are installation-wide facts about agents, no tenant's data
SKIPPED = re.compile(r"^/api/v1/(platform|auth|me|catalog)/|^/agents/|^/(healthz|readyz|metrics)$")


def _ok(response: Any, status: int = 200) -> Any:
    assert response.status_code == status, response.text
    return response.json() if response.content else None


async def _victim(app: FastAPI, seed: Seed) -> tuple[dict[str, str], set[str]]:
    """A tenant with one of everything; its ids by path parameter, and every id it holds."""
    tenant, admin = await seed.tenant()
    token = (await tokens.create_token(seed.ctx(admin, tenant.id), "probe")).plaintext
    revision = await publish(app.state.services.pool, tenant.id, FILES)
    outsider = await seed.user()
    async with client_for(app, token) as http:
        team = _ok(await http.post("/api/v1/teams", json={"slug": "web", "display_name": "W"}), 201)
        member = _ok(
            await http.post("/api/v1/members", json={"username": "victim-m", "password": PASSWORD}),
            201,
        )
        _ok(
            await http.post(
                f"/api/v1/teams/{team['id']}/members", json={"user_id": member["user_id"]}
            ),
            204,
        )
        account = _ok(await http.post("/api/v1/service-accounts", json={"name": "ci"}), 201)
        binding = _ok(
            await http.post(
                "/api/v1/role-bindings", json={"role": "viewer", "user_id": member["user_id"]}
            ),
            201,
        )
        api_token = _ok(await http.post("/api/v1/tokens", json={"name": "spare"}), 201)
        invitation = _ok(
            await http.post("/api/v1/invitations", json={"user_id": str(outsider.id)}), 201
        )
        zone = _ok(
            await http.post("/api/v1/network-zones", json={"cidr": "10.0.0.0/8", "labels": {}}),
            201,
        )
        enrollment = _ok(await http.post("/api/v1/enrollment-tokens", json={"name": "e"}), 201)
        change_set = _ok(await http.post("/api/v1/change-sets", json={"title": "probe"}), 201)
        _ok(
            await http.put(
                f"/api/v1/change-sets/{change_set['id']}/files/layers/base.toml",
                json={"content": FILES["layers/base.toml"].replace("false", "true")},
                headers={"If-Match": change_set["digest"]},
            )
        )
        operation = _ok(await http.post(f"/api/v1/change-sets/{change_set['id']}/validate"), 202)
        _ok(await http.post("/api/v1/secrets/DB_PASS/versions", json={"value": "v1-value"}), 201)
        sink = _ok(
            await http.post(
                "/api/v1/audit-sinks",
                json={"kind": "webhook", "config": {"url": "https://siem.example.com/"}},
            ),
            201,
        )
        anchor = _ok(
            await http.post(
                "/api/v1/trust-anchors",
                json={"name": "ca", "ca_pem": issue("probe CA", ca=True).pem().decode()},
            ),
            201,
        )
    async with client_for(app, enrollment["token"]) as http:
        agent = _ok(
            await http.post(
                "/api/v1/enroll/telegraf", json={"instance_id": "v-1", "hostname": "v-1"}
            ),
            201,
        )
    ids = {
        "team_id": team["id"],
        "user_id": member["user_id"],
        "account_id": account["id"],
        "binding_id": binding["id"],
        "token_id": api_token["id"],
        "invitation_id": invitation["id"],
        "zone_id": zone["id"],
        "ref": change_set["id"],
        "operation_id": operation["id"],
        "agent_id": agent["agent_id"],
        "host_id": agent["host_id"],
        "number": str(revision),
        "path": "layers/base.toml",
        "name": "DB_PASS",
        "anchor_id": anchor["id"],
        "sink_id": sink["id"],
    }
    held = {v for k, v in ids.items() if k not in {"number", "path", "name"}}
    held |= {str(tenant.id), enrollment["id"], str(admin.id)}
    return ids, held


async def test_other_tenants_see_nothing_of_this_one(sp_app: FastAPI) -> None:
    seed = Seed(sp_app.state.services)
    ids, held = await _victim(sp_app, seed)
    other, other_admin = await seed.tenant()
    probe = (await tokens.create_token(seed.ctx(other_admin, other.id), "p")).plaintext
    async with client_for(sp_app) as http:
        document = (await http.get("/api/v1/openapi.json")).json()
    queries = {"from": "1", "to": ids["number"]}
    probed, problems = 0, []
    async with client_for(sp_app, probe) as http:
        for path, item in sorted(document["paths"].items()):
            operation = item.get("get")
            if operation is None or SKIPPED.search(path):
                continue
            params = [p for p in operation.get("parameters", []) if p["in"] == "path"]
            missing = [p["name"] for p in params if p["name"] not in ids]
            assert not missing, f"{path}: the probe has no id for {missing}"
            url = path
            for p in params:
                url = url.replace("{" + p["name"] + "}", ids[p["name"]])
            # filters by this tenant's ids; required ones as this tenant would send them
            query = {
                p["name"]: queries.get(p["name"], ids.get(p["name"]))
                for p in operation.get("parameters", [])
                if p["in"] == "query"
                and (p["name"].endswith("_id") or p.get("required"))
                and (p["name"] in ids or p["name"] in queries)
            }
            answer = await http.get(url, params=query)
            probed += 1
            if params and answer.status_code != 404:
                problems.append(f"GET {url}: {answer.status_code} (expected 404)")
            elif not params and answer.status_code not in (200, 404):
                problems.append(f"GET {url}: {answer.status_code} (expected a list or 404)")
            shown = answer.text
            if answer.headers.get("content-type", "").endswith("json"):
                body = answer.json()
                if isinstance(body, dict):
                    body.pop("instance", None)  # the problem names the path asked for
                shown = json.dumps(body)
            leaked = sorted(i for i in held if i in shown)
            if leaked:
                problems.append(f"GET {url} shows {leaked}")
    assert problems == []
    assert probed >= 25
