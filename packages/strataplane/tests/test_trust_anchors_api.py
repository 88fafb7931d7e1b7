"""Trust anchors over the API: add (a CA certificate only), list, get, revoke; another
tenant gets 404; hostile input is a 4xx problem."""

from __future__ import annotations

import pytest
from fastapi import FastAPI
from platformkit.testing.pki import issue
from strataplane.actions import tokens
from strataplane.testing import Seed, client_for


def _pem(ca: bool) -> str:
    return issue("CA", ca=ca).pem().decode()


async def _tokens(app: FastAPI) -> tuple[str, str]:
    seed = Seed(app.state.services)
    found = []
    for _ in range(2):
        tenant, admin = await seed.tenant()
        found.append((await tokens.create_token(seed.ctx(admin, tenant.id), "t")).plaintext)
    return found[0], found[1]


async def test_add_list_get_revoke_and_isolation(sp_app: FastAPI) -> None:
    mine, theirs = await _tokens(sp_app)
    async with client_for(sp_app, mine) as http:
        added = await http.post("/api/v1/trust-anchors", json={"name": "ca", "ca_pem": _pem(True)})
        assert added.status_code == 201, added.text
        anchor = added.json()
        again = await http.post("/api/v1/trust-anchors", json={"name": "ca", "ca_pem": _pem(True)})
        leaf = await http.post(
            "/api/v1/trust-anchors", json={"name": "leaf", "ca_pem": _pem(False)}
        )
        junk = await http.post("/api/v1/trust-anchors", json={"name": "junk", "ca_pem": "nope"})
        listed = await http.get("/api/v1/trust-anchors")
    assert again.json()["code"] == "trust_anchor.name_taken"
    assert (leaf.status_code, leaf.json()["code"]) == (422, "trust_anchor.invalid")
    assert junk.status_code == 422
    assert [a["name"] for a in listed.json()] == ["ca"]
    async with client_for(sp_app, theirs) as http:
        other = [
            await http.get(f"/api/v1/trust-anchors/{anchor['id']}"),
            await http.delete(f"/api/v1/trust-anchors/{anchor['id']}"),
        ]
        assert (await http.get("/api/v1/trust-anchors")).json() == []
    assert [o.status_code for o in other] == [404, 404]
    async with client_for(sp_app, mine) as http:
        revoked = await http.delete(f"/api/v1/trust-anchors/{anchor['id']}")
        gone = await http.get(f"/api/v1/trust-anchors/{anchor['id']}")
    assert revoked.json() == {"agents_unbound": 0}
    assert gone.status_code == 404


@pytest.mark.parametrize(
    ("body", "status"),
    [
        ({"name": "a\u0000b", "ca_pem": "x"}, 422),
        ({"name": "a", "ca_pem": "x", "host_mapping": "ip"}, 422),
        ({"name": 2**70, "ca_pem": "x"}, 422),
        ({"name": "a", "ca_pem": "x" * (2 << 20)}, 413),
    ],
)
async def test_hostile_input(sp_app: FastAPI, body: object, status: int) -> None:
    mine, _ = await _tokens(sp_app)
    async with client_for(sp_app, mine) as http:
        answer = await http.post("/api/v1/trust-anchors", json=body)
    assert answer.status_code == status, answer.text
    assert answer.headers["content-type"].startswith("application/problem+json")
