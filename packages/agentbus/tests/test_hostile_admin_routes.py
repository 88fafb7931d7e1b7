"""Hostile input on the administration routes and console forms, one gateway for the module:
policies (Cedar text too: huge, deeply nested, long operator chains), analytics queries,
invitations, support consents, keys, and the console's policy editor, dead-letter redrive and
sign-in link. NUL and a lone surrogate in each text field and in the path or query, 2**70 and
-2**70, JSON nested 100,000 deep, a 30 MiB body, wrong types, empty and over-long text: each
is a 4xx with its AB- code (never a 5xx, never the end of the process), nothing is stored, and
the gateway keeps serving."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from agentbus.console.sessions import mint_link
from agentbus.gateway.config import GatewaySettings
from agentbus.gateway.testing import serving
from agentbus.gateway.testkit import World, make_world
from agentbus.testing import agentbus_template
from platformkit.testing.databases import DatabaseFactory
from platformkit.testing.hostile import HUGE, Case, assert_answered, form_cases, json_cases

CEDAR = 'permit(principal, action, resource) when { resource.name == "x" };'
H = "permit(principal, action, resource) when { "
HOSTILE_CEDAR = {
    "deep brackets": H + "(" * 5000 + "true" + ")" * 5000 + " };",
    "long chain": H + "&&".join(["true"] * 10_000) + " };",
    "long member chain": H + "context" + ".a" * 20_000 + " };",
    "over 64 KiB": H + "true" + " " * 70_000 + " };",
    "deep sets": H + "[" * 800 + "]" * 800 + " == [] };",
}


def api_cases(fields: dict[str, Any]) -> list[Case]:
    """The shared hostile variants of a JSON body (a mistyped value refused), and hostile
    Cedar text where the body carries a policy."""
    cases = json_cases(fields, mistyped_refused=True)
    if "cedar" in fields:
        cases += [(f"cedar {k}", put_cedar(fields, v), True) for k, v in HOSTILE_CEDAR.items()]
    return cases


def put_cedar(fields: dict[str, Any], cedar: str) -> bytes:
    return json.dumps({**fields, "cedar": cedar}).encode()


@pytest.fixture(scope="module")
async def world(
    database_factory: DatabaseFactory, nats_url: str, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[tuple[World, httpx.AsyncClient, dict[str, str]]]:
    url = database_factory.create(await agentbus_template(database_factory), stem="agentbus")
    root = Path(tmp_path_factory.mktemp("hostile-admin"))
    settings = GatewaySettings(
        database_url=url, nats_url=nats_url, config_dir=root / "config", background=False,
        analytics=True, analytics_dir=root / "ch", request_rate_limits=False,
    )  # fmt: skip
    try:
        async with serving(settings) as (app, http):
            gw = app.state.gateway
            w = await make_world(gw, "hostile")
            http.headers["Authorization"] = f"Bearer {w.token}"
            made = await http.post("/v1/policies", json={"name": "base", "cedar": CEDAR})
            assert made.status_code == 201, made.text
            link = await mint_link(gw.pool, w.tenant_id, "owner@hostile.example")
            signed = await http.post("/console/sign-in", data={"link": link})
            assert signed.status_code == 303, signed.text
            page = await http.get("/console/policies")
            found = re.search(r'name="csrf" value="([^"]+)"', page.text)
            assert found is not None, page.text[:500]
            ids = {"policy": made.json()["id"], "csrf": found.group(1)}
            yield w, http, ids
    finally:
        database_factory.drop(url)


API = [
    ("POST", "/v1/policies", {"name": "p2", "cedar": CEDAR, "workspace": "ws_x"}),
    ("POST", "/v1/policies/dry-run", {"cedar": CEDAR, "name": "draft", "last": 10}),
    ("POST", "/v1/policies/{policy}/versions", {"cedar": CEDAR}),
    ("PATCH", "/v1/policies/{policy}", {"enabled": True}),
    ("POST", "/v1/invitations", {"email": "a@example.com", "role": "member"}),
    ("POST", "/v1/invitations/accept", {"token": "x" * 20, "display_name": "A"}),
    ("POST", "/v1/support/consents", {"hours": 1, "ticket_ref": "T-1"}),
    ("PUT", "/v1/keys/kek", {"kek_ref": "local:main"}),
]
API_CASES = [(m, p, *case) for m, p, f in API for case in api_cases(f)]


async def send(
    world: tuple[World, httpx.AsyncClient, dict[str, str]],
    method: str,
    path: str,
    content: bytes | None = None,
    ctype: str = "application/json",
    params: dict[str, str] | None = None,
) -> httpx.Response:
    _w, http, ids = world
    # every write of the module goes through here: the last listing is this one's "before"
    before = _LISTED.get(id(http)) or await listing(http)
    answer = await http.request(
        method, path.format(**ids), content=content, params=params,
        headers={"content-type": ctype},
    )  # fmt: skip
    after = _LISTED[id(http)] = await listing(http)
    if answer.status_code >= 400:
        assert after == before, "a refused request stored something"
    return answer


_LISTED: dict[int, tuple[Any, ...]] = {}


async def listing(http: httpx.AsyncClient) -> tuple[Any, ...]:
    """What the refused requests could have stored, as the API lists it (and the gateway
    answering is the proof it still serves)."""
    out = []
    for path in ("/v1/policies", "/v1/invitations", "/v1/support/consents", "/v1/keys"):
        answer = await http.get(path)
        assert answer.status_code == 200, (path, answer.text[:300])
        out.append(answer.text)
    return tuple(out)


@pytest.mark.parametrize(
    ("method", "path", "label", "body", "must"),
    API_CASES,
    ids=[f"{c[0]} {c[1]} {c[2]}" for c in API_CASES],
)
async def test_api_refuses(
    world: tuple[World, httpx.AsyncClient, dict[str, str]],
    method: str,
    path: str,
    label: str,
    body: bytes,
    must: bool,
) -> None:
    answer = await send(world, method, path, body)
    assert_answered(label, answer, must)
    if answer.status_code >= 400:
        assert answer.json()["code"].startswith("AB-"), answer.text[:300]


@pytest.mark.parametrize(("method", "path"), [(m, p) for m, p, _ in API])
async def test_api_refuses_a_huge_body(
    world: tuple[World, httpx.AsyncClient, dict[str, str]], method: str, path: str
) -> None:
    answer = await send(world, method, path, b'{"name": "' + b"x" * HUGE + b'"}')
    assert answer.status_code == 413, answer.text[:300]
    assert answer.json()["code"].startswith("AB-")


BAD = ["a\x00b", "a\ud800b", str(2**70), str(-(2**70)), "", "x" * 5000]
QUERIES = [
    ("/v1/analytics/cost", "by"),
    ("/v1/analytics/cost", "since"),
    ("/v1/analytics/graph", "until"),
    ("/v1/analytics/latency", "slo_ms"),
    ("/v1/analytics/latency", "since"),
    ("/v1/policies", "x"),
]
RANGES = [
    {"since": "0001-01-01T00:00:00Z", "until": "9999-12-31T23:59:59Z"},
    {"since": "2030-01-01T00:00:00Z", "until": "2020-01-01T00:00:00Z"},
    {"since": "1900-01-01T00:00:00+14:00"},
    {"until": "2262-04-12T00:00:00Z"},
]


def raw_query(value: str) -> str:
    """Percent-encoded as UTF-8, a lone surrogate as its three bytes (what no client sends but
    a hostile one can)."""
    return "".join(
        "%ED%A0%80" if c == "\ud800" else httpx.QueryParams({"v": c}).__str__()[2:] for c in value
    )


@pytest.mark.parametrize("bad", BAD, ids=["nul", "surrogate", "2**70", "-2**70", "empty", "long"])
@pytest.mark.parametrize(("path", "name"), QUERIES)
async def test_query_parameters(
    world: tuple[World, httpx.AsyncClient, dict[str, str]], path: str, name: str, bad: str
) -> None:
    answer = await send(world, "GET", f"{path}?{name}={raw_query(bad)}")
    assert answer.status_code < 500, (answer.status_code, answer.text[:300])
    if "\x00" in bad or "\ud800" in bad:
        assert 400 <= answer.status_code < 500, answer.text[:300]


@pytest.mark.parametrize("params", RANGES)
@pytest.mark.parametrize(
    "path", ["/v1/analytics/cost", "/v1/analytics/graph", "/v1/analytics/latency"]
)
async def test_time_ranges(
    world: tuple[World, httpx.AsyncClient, dict[str, str]], path: str, params: dict[str, str]
) -> None:
    answer = await send(world, "GET", path, params=params)
    assert answer.status_code < 500, (answer.status_code, answer.text[:300])


PATHS = [
    ("GET", "/v1/policies/{bad}"),
    ("PATCH", "/v1/policies/{bad}"),
    ("POST", "/v1/policies/{bad}/versions"),
    ("DELETE", "/v1/invitations/{bad}"),
    ("DELETE", "/v1/support/consents/{bad}"),
    ("GET", "/v1/analytics/conversations/{bad}/trace"),
    ("POST", "/console/policies/{bad}/versions"),
    ("POST", "/console/dead-letters/{bad}/redrive"),
]


@pytest.mark.parametrize("bad", ["a%00b", "%ED%A0%80", str(2**70), "pol_" + "x" * 5000])
@pytest.mark.parametrize(("method", "path"), PATHS)
async def test_path_parameters(
    world: tuple[World, httpx.AsyncClient, dict[str, str]], method: str, path: str, bad: str
) -> None:
    answer = await send(world, method, path.replace("{bad}", bad), b"{}")
    assert answer.status_code < 500, (answer.status_code, answer.text[:300])
    assert answer.status_code >= 300


FORMS = [
    ("/console/policies", {"name": "f1", "cedar": CEDAR}),
    ("/console/policies/dry-run", {"name": "draft", "cedar": CEDAR, "last": "10"}),
    ("/console/policies/{policy}/versions", {"cedar": CEDAR}),
    ("/console/policies/{policy}/enabled", {"enabled": "true"}),
    ("/console/dead-letters/msg_0000000000000000000000000000/redrive", {"x": "1"}),
    ("/console/sign-in", {"link": "x" * 40}),
]


def console_form_cases(fields: dict[str, str]) -> list[Case]:
    """The shared hostile variants of a form body, and hostile Cedar text where the form
    carries a policy."""
    cases = form_cases(fields)
    if "cedar" in fields:
        cases += [
            (f"cedar {k}", str(httpx.QueryParams({**fields, "cedar": v})).encode(), False)
            for k, v in HOSTILE_CEDAR.items()
        ]
    return cases


FORM_CASES = [(p, *case) for p, f in FORMS for case in console_form_cases(f)]


@pytest.mark.parametrize(
    ("path", "label", "body", "must"), FORM_CASES, ids=[f"{c[0]} {c[1]}" for c in FORM_CASES]
)
async def test_forms_refuse(
    world: tuple[World, httpx.AsyncClient, dict[str, str]],
    path: str,
    label: str,
    body: bytes,
    must: bool,
) -> None:
    token = f"csrf={world[2]['csrf']}&".encode()
    answer = await send(world, "POST", path, token + body, "application/x-www-form-urlencoded")
    assert_answered(label, answer, must)


@pytest.mark.parametrize("path", [p for p, _ in FORMS])
async def test_forms_refuse_a_huge_body(
    world: tuple[World, httpx.AsyncClient, dict[str, str]], path: str
) -> None:
    body = f"csrf={world[2]['csrf']}&name=".encode() + b"x" * HUGE
    answer = await send(world, "POST", path, body, "application/x-www-form-urlencoded")
    assert answer.status_code == 413


ODD = [
    ("PUT", "/v1/keys/kek", {"kek_ref": "kms://platform/deployment-keyring/" + "9" * 30}),
    ("PUT", "/v1/keys/kek", {"kek_ref": "kms://platform/deployment-keyring/-1"}),
    ("PUT", "/v1/keys/kek", {"kek_ref": "kms://aws/"}),
    ("PUT", "/v1/keys/kek", {"kek_ref": "kms://aws/arn:aws:kms:xx-nowhere-1:1:key/" + "x" * 1900}),
    ("POST", "/v1/invitations", {"email": "a@[::1]"}),
    ("POST", "/v1/invitations", {"email": "a@b@c", "workspace": "ws_" + "0" * 26}),
    ("POST", "/v1/invitations", {"email": "a@example.com", "workspace": "ws_\u2028"}),
    ("POST", "/v1/invitations/accept", {"token": "abt_" + "x" * 200}),
    ("POST", "/v1/support/consents", {"hours": 5e-324}),
    ("POST", "/v1/support/consents", {"hours": 168, "ticket_ref": "\u2028\u202e"}),
    ("POST", "/v1/policies", {"name": "x" * 10_000, "cedar": CEDAR}),
    ("POST", "/v1/policies", {"name": "../x", "cedar": CEDAR, "workspace": "ws_" + "0" * 26}),
    ("POST", "/v1/policies/dry-run", {"cedar": CEDAR, "last": 0}),
    ("POST", "/v1/policies/dry-run", {"cedar": CEDAR, "last": 1_000_000}),
    ("POST", "/v1/policies/dry-run", {"cedar": CEDAR, "workspace": "ws_" + "0" * 26}),
]


@pytest.mark.parametrize(("method", "path", "body"), ODD, ids=[json.dumps(c[2])[:60] for c in ODD])
async def test_odd_values_are_refused_or_kept_readable(
    world: tuple[World, httpx.AsyncClient, dict[str, str]],
    method: str,
    path: str,
    body: dict[str, Any],
) -> None:
    """Values each field's type allows but its rules may not: a 4xx with its AB- code, or
    stored so that the lists still read."""
    answer = await send(world, method, path, json.dumps(body).encode())
    assert answer.status_code < 500, answer.text[:300]
    if answer.status_code >= 400:
        assert answer.json()["code"].startswith("AB-"), answer.text[:300]
    await listing(world[1])
