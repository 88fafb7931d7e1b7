"""Hostile input on the routes added with Settings files, single sign-on, Vector and Elastic
Agent enrolment and the SETTINGS action, one server for the module: NUL and a lone surrogate in
each text field, query and path parameter, 2**70 and -2**70, JSON nested 100,000 deep, a
30 MiB body, wrong types, empty and over-long text, and a settings.toml of hostile values
through a change set and its validation. Each is a 4xx (a 422 or 413 problem naming the field
on the management API; the Fleet protocol's own error on the Elastic Agent's), nothing is
stored, and the server keeps serving."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from asgi_lifespan import LifespanManager
from platformkit.passwords import FAST_TEST_POLICY
from platformkit.testing.databases import DatabaseFactory
from platformkit.testing.hostile import DEEP, HUGE, Case, json_cases
from pydantic import SecretStr
from strataplane.actions import tokens
from strataplane.app import create_app
from strataplane.settings import Settings
from strataplane.testing import Seed, client_for

CS = "/api/v1/change-sets"
ELASTIC = {"type": "PERMANENT", "id": "ea-1", "metadata": {"local": {"host": {"hostname": "h"}}}}


def api_cases(fields: dict[str, Any]) -> list[Case]:
    """The shared hostile variants of a JSON body, and a body over the size limit."""
    return [*json_cases(fields), ("huge", b'{"x": "' + b"x" * HUGE + b'"}', True)]


@pytest.fixture(scope="module")
async def world(
    database_factory: DatabaseFactory, strataplane_template: str
) -> AsyncIterator[tuple[httpx.AsyncClient, dict[str, str]]]:
    url = database_factory.create(strataplane_template, stem="sp")
    settings = Settings(database_url=SecretStr(url), pool_size=4, shards=2)
    app = create_app(settings, password_policy=FAST_TEST_POLICY)
    try:
        async with LifespanManager(app):
            seed = Seed(app.state.services)
            tenant, admin = await seed.tenant()
            token = (await tokens.create_token(seed.ctx(admin, tenant.id), "t")).plaintext
            async with client_for(app, token) as http:
                ids = {}
                for kind in ("vector", "elastic-agent"):
                    made = await http.post(
                        "/api/v1/enrollment-tokens", json={"name": kind, "agent_kind": kind}
                    )
                    assert made.status_code == 201, made.text
                    ids[kind] = made.json()["token"]
                enrolled = await http.post(
                    "/api/fleet/agents/enroll", json=ELASTIC,
                    headers={"Authorization": f"ApiKey {ids['elastic-agent']}"},
                )  # fmt: skip
                assert enrolled.status_code == 200, enrolled.text
                agents = (await http.get("/api/v1/agents")).json()["items"]
                ids["agent"] = agents[0]["id"]
                yield http, ids
    finally:
        database_factory.drop(url)


async def stored(http: httpx.AsyncClient) -> tuple[str, ...]:
    """What a refused request could have stored, as the API shows it (and the proof the
    server still serves)."""
    out = []
    for path in ("/api/v1/agents", CS, "/api/v1/enrollment-tokens"):
        answer = await http.get(path)
        assert answer.status_code == 200, (path, answer.text[:300])
        out.append(answer.text)
    return tuple(out)


async def send(
    world: tuple[httpx.AsyncClient, dict[str, str]], method: str, path: str,
    content: bytes | None = None, headers: dict[str, str] | None = None,
) -> httpx.Response:  # fmt: skip
    http, ids = world
    before = await stored(http)
    answer = await http.request(
        method, path.format(**ids), content=content,
        headers={"content-type": "application/json", **(headers or {})},
    )  # fmt: skip
    assert answer.status_code < 500, (path, answer.status_code, answer.text[:300])
    if answer.status_code >= 400:
        assert await stored(http) == before, "a refused request stored something"
    return answer


API = [
    ("POST", "/api/v1/enroll/vector", {"instance_id": "v-1", "hostname": "web-1"}, "vector"),
    ("POST", "/api/v1/agents/{agent}/settings", {"log_level": "debug"}, None),
]
API_CASES = [(m, p, who, *case) for m, p, f, who in API for case in api_cases(f)]


@pytest.mark.parametrize(
    ("method", "path", "who", "label", "body", "must"),
    API_CASES,
    ids=[f"{c[0]} {c[1]} {c[3]}" for c in API_CASES],
)
async def test_api_refuses(
    world: tuple[httpx.AsyncClient, dict[str, str]],
    method: str,
    path: str,
    who: str | None,
    label: str,
    body: bytes,
    must: bool,
) -> None:
    headers = {"Authorization": f"Bearer {world[1][who]}"} if who else {}
    answer = await send(world, method, path, body, headers)
    if must or answer.status_code >= 400:
        assert answer.status_code in (400, 409, 413, 422), (label, answer.text[:300])
        assert answer.headers["content-type"].startswith("application/problem+json")
    if must and label != "huge":
        assert answer.status_code == 422, (label, answer.text[:300])
        assert answer.json()["errors"][0]["field"], answer.text[:300]
    if label == "huge":
        assert answer.status_code == 413


ELASTIC_CASES = [
    ("nul in id", {**ELASTIC, "id": "a\u0000b"}),
    ("surrogate in id", {**ELASTIC, "id": "a\ud800b"}),
    ("2**70 id", {**ELASTIC, "id": 2**70}),
    ("-2**70 type", {**ELASTIC, "type": -(2**70)}),
    ("empty id", {**ELASTIC, "id": ""}),
    ("long id", {**ELASTIC, "id": "x" * 100_000}),
    ("nul hostname", {**ELASTIC, "metadata": {"local": {"host": {"hostname": "a\u0000"}}}}),
    ("nul in metadata", {**ELASTIC, "metadata": {"local": {"host": {"hostname": "h"},
                                                           "x\u0000": "\ud800"}}}),
    ("2**70 in metadata", {**ELASTIC, "metadata": {"local": {"host": {"hostname": "h"},
                                                             "n": 2**70}}}),
    ("wrong metadata", {**ELASTIC, "metadata": [1]}),
    ("nul replace_token", {**ELASTIC, "replace_token": "a\u0000"}),
]  # fmt: skip


@pytest.mark.parametrize(("label", "body"), ELASTIC_CASES, ids=[c[0] for c in ELASTIC_CASES])
async def test_elastic_enrolment_refuses(
    world: tuple[httpx.AsyncClient, dict[str, str]], label: str, body: dict[str, Any]
) -> None:
    key = {"Authorization": f"ApiKey {world[1]['elastic-agent']}"}
    answer = await send(world, "POST", "/api/fleet/agents/enroll", json.dumps(body).encode(), key)
    assert 400 <= answer.status_code < 500, (label, answer.status_code, answer.text[:300])


@pytest.mark.parametrize("body", [b"[" * DEEP + b"]" * DEEP, b'{"x": "' + b"x" * HUGE + b'"}'])
async def test_elastic_enrolment_refuses_deep_and_huge(
    world: tuple[httpx.AsyncClient, dict[str, str]], body: bytes
) -> None:
    key = {"Authorization": f"ApiKey {world[1]['elastic-agent']}"}
    answer = await send(world, "POST", "/api/fleet/agents/enroll", body, key)
    assert answer.status_code in (400, 413), answer.text[:300]


BAD = ["a%00b", "%ED%A0%80", str(2**70), str(-(2**70)), "", "x" * 5000]


@pytest.mark.parametrize("name", ["code", "state", "error"])
@pytest.mark.parametrize("bad", BAD)
async def test_oidc_callback_parameters(
    world: tuple[httpx.AsyncClient, dict[str, str]], name: str, bad: str
) -> None:
    query = {"code": "c", "state": "s", "error": ""} | {name: "BAD"}
    path = "/api/v1/auth/oidc/callback?" + str(httpx.QueryParams(query)).replace("BAD", bad)
    answer = await send(world, "GET", path)
    assert 400 <= answer.status_code < 500, answer.text[:300]
    if "%00" in bad or "%ED" in bad:
        assert answer.status_code == 422


@pytest.mark.parametrize("bad", [*BAD[:3], "x" * 5000])
@pytest.mark.parametrize(
    "path", ["/api/v1/agents/{bad}/settings", f"{CS}/{{bad}}/files/settings.toml"]
)
async def test_path_parameters(
    world: tuple[httpx.AsyncClient, dict[str, str]], path: str, bad: str
) -> None:
    answer = await send(world, "POST", path.replace("{bad}", bad), b'{"log_level": "info"}')
    assert 400 <= answer.status_code < 500, answer.text[:300]


SETTINGS = {
    "nul in owner": 'owner = "a\\u0000b"\n',
    "surrogate escape": 'owner = "\\ud800"\n',
    "2**70 level": f"[render]\nlevel = {2**70}\n",
    "-2**70 approvals": f"[review]\nminimumApprovals = {-(2**70)}\n",
    "bigint level": "[render]\nlevel = 9223372036854775807\n",
    "huge duration": '[retention]\nsilentAgents = "99999999999999999999d"\n',
    "huge poll": '[elastic-agent]\npollTimeout = "9999999999999999h"\n',
    "huge heartbeat": '[telegraf.heartbeat]\ninterval = "99999999999999999999999999s"\n',
    "zero interval": '[vector.heartbeat]\ninterval = "0s"\n',
    "wrong types": '[retention]\nfailedRunsKept = "many"\npassedRunsKept = 1.5e308\n',
    "nul tls path": '[telegraf.tls]\nca = "a\\u0000b"\n',
    "deep": "x = " + "[" * 5000 + "]" * 5000 + "\n",
    "long addendum": '[assistant]\npromptAddendum = "' + "x" * 300_000 + '"\n',
    "nul model": '[assistant]\ndefaultModel = "a/\\u0000"\n',
    "long policy name": '[rollout]\ndefaultPolicy = "' + "x" * 10_000 + '"\n',
    "empty": "",
}


@pytest.mark.parametrize(("label", "content"), SETTINGS.items(), ids=list(SETTINGS))
async def test_settings_files_through_a_change_set(
    world: tuple[httpx.AsyncClient, dict[str, str]], label: str, content: str
) -> None:
    http, _ids = world
    cs = (await http.post(CS, json={"title": f"settings {label}"})).json()
    etag = {"If-Match": f'"{cs["digest"]}"'}
    body = json.dumps({"content": content}).encode()
    edit = await send(world, "PUT", f"{CS}/{cs['id']}/files/settings.toml", body, etag)
    assert edit.status_code in (200, 413, 422), (label, edit.text[:300])
    op = await http.post(f"{CS}/{cs['id']}/validate")
    assert op.status_code == 202, op.text
    for _ in range(1200):
        state = (await http.get(f"/api/v1/operations/{op.json()['id']}")).json()
        if state["state"] in ("succeeded", "failed"):
            break
        await asyncio.sleep(0.05)
    assert state["state"] == "succeeded", (label, state)
    checked = (await http.get(f"{CS}/{cs['id']}")).json()
    if edit.status_code == 200 and label != "empty":
        assert not checked["validated"], (label, checked.get("validation"))
