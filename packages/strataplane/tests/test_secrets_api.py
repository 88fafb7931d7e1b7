"""Secrets over the management API: values are written, sealed under the tenant's data key and
never shown back; versions and metadata only; another tenant sees 404 on every route; hostile
input is a 4xx problem."""

from __future__ import annotations

import psycopg
import pytest
from fastapi import FastAPI
from strataplane.actions import tokens
from strataplane.simulate.seed import publish
from strataplane.testing import Seed, client_for

VALUE = "hunter2-correct-horse"
SECRET = 'owner = "platform"\n\n[grant]\nmatchLabels = { env = "prod" }\n'
LAYER = (
    'agentKind = "telegraf"\nowner = "platform"\n\n[config.inputs.cpu.default]\npercpu = false\n'
)


async def _tenant(
    app: FastAPI, files: dict[str, str] | None = None, seed: Seed | None = None
) -> tuple[str, object]:
    seed = seed or Seed(app.state.services)
    tenant, admin = await seed.tenant()
    token = (await tokens.create_token(seed.ctx(admin, tenant.id), "t")).plaintext
    tree = {"layers/base.toml": LAYER, "secrets/DB_PASS.toml": SECRET}
    await publish(app.state.services.pool, tenant.id, files if files is not None else tree)
    return token, tenant.id


async def test_write_list_show_never_return_the_value(
    sp_app: FastAPI, strataplane_database: str
) -> None:
    token, tenant_id = await _tenant(sp_app)
    async with client_for(sp_app, token) as http:
        first = await http.post("/api/v1/secrets/DB_PASS/versions", json={"value": VALUE})
        assert first.status_code == 201, first.text
        assert first.json()["version"] == 1
        second = await http.post(
            "/api/v1/secrets/DB_PASS/versions",
            json={"value": VALUE + "-2", "comment": "rotated", "rotate": True},
        )
        assert second.json()["version"] == 2
        listed = await http.get("/api/v1/secrets")
        shown = await http.get("/api/v1/secrets/DB_PASS")
        audit = await http.get("/api/v1/audit/events")
    assert listed.status_code == shown.status_code == 200
    assert [s["name"] for s in listed.json()] == ["DB_PASS"]
    detail = shown.json()
    assert detail["current_version"] == 2
    assert detail["in_spec"] is True
    assert [v["version"] for v in detail["history"]] == [2, 1]
    for answer in (first, second, listed, shown, audit):
        assert VALUE not in answer.text
    async with await psycopg.AsyncConnection.connect(strataplane_database) as conn:
        cur = await conn.execute(
            "SELECT s.owner, s.key_id, s.ciphertext, k.kek_id FROM strataplane.sealed_value s "
            "JOIN strataplane.tenant_key k ON k.tenant_id = s.tenant_id AND k.id = s.key_id "
            "WHERE s.tenant_id = %s ORDER BY s.owner",
            (tenant_id,),
        )
        rows = await cur.fetchall()
        cur = await conn.execute("SELECT count(*) FROM strataplane.secret_key")
        keys = await cur.fetchone()
    assert [r[0] for r in rows] == ["secret/DB_PASS/1", "secret/DB_PASS/2"]
    assert all(VALUE.encode() not in bytes(r[2]) for r in rows)
    assert keys is not None
    assert keys[0] >= 1


async def test_rotate_needs_a_first_value_and_a_secret_needs_its_object(sp_app: FastAPI) -> None:
    token, _ = await _tenant(sp_app)
    async with client_for(sp_app, token) as http:
        rotate = await http.post(
            "/api/v1/secrets/DB_PASS/versions", json={"value": VALUE, "rotate": True}
        )
        missing = await http.post("/api/v1/secrets/NOPE/versions", json={"value": VALUE})
    assert rotate.status_code == 409
    assert rotate.json()["code"] == "secret.no_value"
    assert missing.status_code == 404
    assert missing.json()["code"] == "secret.not_found"
    assert VALUE not in rotate.text + missing.text


async def test_disable_delete_rules(sp_app: FastAPI) -> None:
    token, tenant_id = await _tenant(sp_app)
    async with client_for(sp_app, token) as http:
        for value in ("one-value", "two-value"):
            await http.post("/api/v1/secrets/DB_PASS/versions", json={"value": value})
        enabled = await http.delete("/api/v1/secrets/DB_PASS/versions/2")
        in_spec = await http.delete("/api/v1/secrets/DB_PASS")
        disabled = await http.post("/api/v1/secrets/DB_PASS/versions/2/disable")
        current = (await http.get("/api/v1/secrets/DB_PASS")).json()["current_version"]
        deleted = await http.delete("/api/v1/secrets/DB_PASS/versions/2")
        await publish(sp_app.state.services.pool, tenant_id, {"layers/base.toml": LAYER})
        gone = await http.delete("/api/v1/secrets/DB_PASS")
        after = await http.get("/api/v1/secrets/DB_PASS")
    assert enabled.json()["code"] == "secret_version.enabled"
    assert in_spec.json()["code"] == "secret.in_spec"
    assert disabled.status_code == 204
    assert current == 1
    assert deleted.status_code == gone.status_code == 204
    assert after.status_code == 404


async def test_another_tenant_gets_404_on_every_route(sp_app: FastAPI) -> None:
    seed = Seed(sp_app.state.services)
    token_a, _ = await _tenant(sp_app, seed=seed)
    token_b, _ = await _tenant(sp_app, {"layers/base.toml": LAYER}, seed)
    async with client_for(sp_app, token_a) as http:
        await http.post("/api/v1/secrets/DB_PASS/versions", json={"value": VALUE})
    async with client_for(sp_app, token_b) as http:
        answers = [
            await http.get("/api/v1/secrets/DB_PASS"),
            await http.get("/api/v1/secrets/DB_PASS/deliveries"),
            await http.post("/api/v1/secrets/DB_PASS/versions", json={"value": "x"}),
            await http.post("/api/v1/secrets/DB_PASS/versions/1/disable"),
            await http.post("/api/v1/secrets/DB_PASS/versions/1/enable"),
            await http.delete("/api/v1/secrets/DB_PASS/versions/1"),
            await http.delete("/api/v1/secrets/DB_PASS"),
        ]
        listed = await http.get("/api/v1/secrets")
    assert [a.status_code for a in answers] == [404] * len(answers)
    assert listed.json() == []


@pytest.mark.parametrize(
    ("method", "path", "body", "status"),
    [
        ("POST", "/api/v1/secrets/DB_PASS/versions", {"value": "a\u0000b"}, 422),
        ("POST", "/api/v1/secrets/DB_PASS/versions", {"value": "v", "comment": "\u0000"}, 422),
        ("POST", "/api/v1/secrets/DB_PASS/versions", {"value": 2**70}, 422),
        ("POST", f"/api/v1/secrets/DB_PASS/versions/{2**70}/disable", None, 422),
        ("DELETE", f"/api/v1/secrets/DB_PASS/versions/{2**70}", None, 422),
        ("GET", f"/api/v1/secrets/DB_PASS/deliveries?before={2**70}", None, 422),
        ("GET", "/api/v1/secrets/DB%00PASS", None, 422),
        ("GET", "/api/v1/secrets/" + "A" * 129, None, 422),
        ("POST", "/api/v1/secrets/DB_PASS/versions", {"value": "x" * (2 << 20)}, 413),
    ],
)
async def test_hostile_input_is_a_4xx_problem(
    sp_app: FastAPI, method: str, path: str, body: object, status: int
) -> None:
    token, _ = await _tenant(sp_app)
    async with client_for(sp_app, token) as http:
        answer = await http.request(method, path, json=body)
    assert answer.status_code == status, answer.text
    assert answer.headers["content-type"].startswith("application/problem+json")


async def test_deep_json_is_refused(sp_app: FastAPI) -> None:
    token, _ = await _tenant(sp_app)
    deep = '{"value": ' + "[" * 5000 + "]" * 5000 + "}"
    async with client_for(sp_app, token) as http:
        answer = await http.post(
            "/api/v1/secrets/DB_PASS/versions",
            content=deep,
            headers={"Content-Type": "application/json"},
        )
    assert 400 <= answer.status_code < 500, answer.text


async def test_secret_write_needs_secret_admin_on_the_secrets_owner(sp_seed: Seed) -> None:
    from strataplane import errors
    from strataplane.actions import secrets, teams

    tenant, admin = await sp_seed.tenant()
    admin_ctx = sp_seed.ctx(admin, tenant.id)
    web = await teams.create_team(admin_ctx, "web", "Web")
    await teams.create_team(admin_ctx, "platform", "Platform")
    files = {
        "secrets/WEB_PASS.toml": 'owner = "web"\n\n[grant]\n',
        "secrets/DB_PASS.toml": SECRET,
    }
    await publish(sp_seed.services.pool, tenant.id, files)
    scoped = await sp_seed.member(
        admin_ctx, "secret-admin", scope_kind="owner", scope_team_id=web.id
    )
    viewer = await sp_seed.member(admin_ctx, "viewer")
    scoped_ctx = sp_seed.ctx(scoped, tenant.id)
    made = await secrets.set_secret(scoped_ctx, "WEB_PASS", VALUE)
    assert made.version == 1
    with pytest.raises(errors.PermissionDenied):
        await secrets.set_secret(scoped_ctx, "DB_PASS", VALUE)
    with pytest.raises(errors.PermissionDenied):
        await secrets.set_secret(sp_seed.ctx(viewer, tenant.id), "WEB_PASS", VALUE)
    with pytest.raises(errors.PermissionDenied):
        await secrets.list_deliveries(sp_seed.ctx(viewer, tenant.id), "WEB_PASS")
    assert [s.name for s in await secrets.list_secrets(sp_seed.ctx(viewer, tenant.id))] == [
        "DB_PASS",
        "WEB_PASS",
    ]
