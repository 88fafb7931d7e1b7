"""Idempotency-Key against real PostgreSQL, through the app role under forced row-level security."""

from __future__ import annotations

import asyncio
import uuid
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import httpx
import psycopg
import pytest
from fastapi import Depends, FastAPI, Header, Response
from fastapi.responses import StreamingResponse
from platformkit.db.migrator import Migrator, load_directory
from platformkit.db.pool import open_pool, with_user
from platformkit.db.roles import RoleSpec
from platformkit.db.scope import Pool, ScopeSettings
from platformkit.http import (
    REPLAYED_HEADER,
    Idempotency,
    ProblemError,
    create_app,
    no_idempotency_key,
    rls_scope,
)
from prometheus_client import CollectorRegistry
from pydantic import BaseModel

MIGRATIONS = Path(__file__).parent / "http_migrations"
TABLE = "httpkit.idempotency_key"
SCOPE = ScopeSettings(tenant="kit.tenant", platform="kit.scope")
TENANT_A, TENANT_B = uuid.uuid4(), uuid.uuid4()
ALICE = uuid.uuid4()


@dataclass(frozen=True)
class Principal:
    id: uuid.UUID
    tenant_id: uuid.UUID | None


async def authenticate(
    x_principal: Annotated[str, Header()], x_tenant: Annotated[str | None, Header()] = None
) -> Principal:
    # Authentication is the system's job; the test trusts headers.
    return Principal(uuid.UUID(x_principal), uuid.UUID(x_tenant) if x_tenant else None)


def ids(p: Principal) -> tuple[uuid.UUID, uuid.UUID | None]:
    return p.id, p.tenant_id


class NewThing(BaseModel):
    name: str
    delay: float = 0.0


class Busy(ProblemError):
    code = "thing.busy"
    status = 409
    title = "Busy"


def build_app(pool: Pool, calls: Counter[str]) -> FastAPI:
    idem = Idempotency(pool, table=TABLE, scope=rls_scope(SCOPE))
    strict = Idempotency(
        lambda: pool, table=TABLE, scope=rls_scope(SCOPE), required=True, wait_timeout=0.2
    )
    claim = Depends(idem.dependency(authenticate, ids))
    app = create_app(title="idem", version="1", registry=CollectorRegistry())

    @app.post("/things", status_code=201, dependencies=[claim])
    async def create_thing(body: NewThing, response: Response) -> dict[str, Any]:
        calls["things"] += 1
        n = calls["things"]
        await asyncio.sleep(body.delay)
        response.headers["ETag"] = f'"v{n}"'
        response.headers["Location"] = f"/things/{n}"
        response.headers["X-Not-Stored"] = "1"
        return {"id": n, "name": body.name}

    strict_claim = Depends(strict.dependency(authenticate, ids))

    @app.post("/strict", status_code=201, dependencies=[strict_claim])
    async def strict_thing(body: NewThing) -> dict[str, Any]:
        calls["strict"] += 1
        await asyncio.sleep(body.delay)
        return {"name": body.name}

    @app.post("/flaky", status_code=201, dependencies=[claim])
    async def flaky() -> dict[str, int]:
        calls["flaky"] += 1
        if calls["flaky"] == 1:
            raise Busy("try again")
        return {"attempt": calls["flaky"]}

    @app.post("/crash", dependencies=[claim])
    async def crash() -> None:
        calls["crash"] += 1
        raise RuntimeError("boom")

    @app.post("/stream", dependencies=[claim])
    async def stream() -> StreamingResponse:
        calls["stream"] += 1

        async def chunks() -> AsyncIterator[bytes]:
            yield b"one,"
            yield b"two"

        return StreamingResponse(chunks(), media_type="text/plain")

    @app.post(
        "/tokens",
        status_code=201,
        dependencies=[Depends(authenticate), Depends(no_idempotency_key)],
    )
    async def issue_token() -> dict[str, str]:
        calls["tokens"] += 1
        return {"token": f"secret-{calls['tokens']}"}

    app.state.idempotency = idem
    return app


@pytest.fixture
async def migrated(fresh_database: str) -> str:
    migrator = Migrator(
        system="kit_http",
        sources=[load_directory("kit_http", MIGRATIONS)],
        roles=RoleSpec(owner="kit_owner", app="kit_app"),
    )
    await migrator.migrate(fresh_database)
    return fresh_database


@pytest.fixture
async def pool(migrated: str) -> AsyncIterator[Pool]:
    pool = await open_pool(with_user(migrated, "kit_app"), min_size=1, max_size=6)
    yield pool
    await pool.close()


@pytest.fixture
def calls() -> Counter[str]:
    return Counter()


@pytest.fixture
def app(pool: Pool, calls: Counter[str]) -> FastAPI:
    return build_app(pool, calls)


@pytest.fixture
async def client(app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as c:
        c.headers.update({"X-Principal": str(ALICE), "X-Tenant": str(TENANT_A)})
        yield c


def rows(url: str) -> list[tuple[Any, ...]]:
    with psycopg.connect(url) as conn:
        return conn.execute(
            f"SELECT key, tenant_id, response_status, response_headers FROM {TABLE} ORDER BY key"
        ).fetchall()


async def test_repeat_returns_the_stored_response_and_the_handler_runs_once(
    client: httpx.AsyncClient, calls: Counter[str], migrated: str
) -> None:
    first = await client.post("/things", json={"name": "a"}, headers={"Idempotency-Key": "k1"})
    again = await client.post("/things", json={"name": "a"}, headers={"Idempotency-Key": "k1"})
    assert first.status_code == again.status_code == 201
    assert first.content == again.content == b'{"id":1,"name":"a"}'
    for name in ("content-type", "etag", "location"):
        assert again.headers[name] == first.headers[name]
    assert REPLAYED_HEADER not in first.headers
    assert again.headers[REPLAYED_HEADER] == "true"
    assert "x-not-stored" not in again.headers
    assert again.headers["x-request-id"] != first.headers["x-request-id"]
    assert calls["things"] == 1
    [(key, tenant, status, headers)] = rows(migrated)
    assert (key, tenant, status) == ("k1", TENANT_A, 201)
    assert set(headers) == {"content-type", "etag", "location"}


async def test_concurrent_repeat_waits_for_the_first_and_gets_its_response(
    client: httpx.AsyncClient, calls: Counter[str]
) -> None:
    async def later() -> httpx.Response:
        await asyncio.sleep(0.1)  # the first request holds the claim by now
        return await client.post(
            "/things", json={"name": "slow", "delay": 0.5}, headers={"Idempotency-Key": "same"}
        )

    first, second = await asyncio.gather(
        client.post(
            "/things", json={"name": "slow", "delay": 0.5}, headers={"Idempotency-Key": "same"}
        ),
        later(),
    )
    assert calls["things"] == 1
    assert first.status_code == second.status_code == 201
    assert first.content == second.content
    assert REPLAYED_HEADER not in first.headers
    assert second.headers[REPLAYED_HEADER] == "true"


async def test_repeat_waits_at_most_wait_timeout_then_409(
    client: httpx.AsyncClient, calls: Counter[str]
) -> None:
    async def later() -> httpx.Response:
        await asyncio.sleep(0.1)
        return await client.post(
            "/strict", json={"name": "x", "delay": 1.0}, headers={"Idempotency-Key": "busy"}
        )

    first, second = await asyncio.gather(
        client.post(
            "/strict", json={"name": "x", "delay": 1.0}, headers={"Idempotency-Key": "busy"}
        ),
        later(),
    )
    assert first.status_code == 201
    assert second.status_code == 409
    assert second.json()["code"] == "idempotency_key.in_progress"
    assert second.headers["retry-after"] == "1"
    assert calls["strict"] == 1


async def test_failed_response_is_not_stored_so_the_repeat_runs_again(
    client: httpx.AsyncClient, calls: Counter[str], migrated: str
) -> None:
    failed = await client.post("/flaky", headers={"Idempotency-Key": "f"})
    assert failed.status_code == 409
    assert rows(migrated) == []
    retried = await client.post("/flaky", headers={"Idempotency-Key": "f"})
    replayed = await client.post("/flaky", headers={"Idempotency-Key": "f"})
    assert retried.status_code == replayed.status_code == 201
    assert retried.json() == replayed.json() == {"attempt": 2}
    assert calls["flaky"] == 2


async def test_crash_and_stream_are_not_stored(
    client: httpx.AsyncClient, calls: Counter[str], migrated: str
) -> None:
    for _ in range(2):
        crashed = await client.post("/crash", headers={"Idempotency-Key": "c"})
        assert crashed.status_code == 500
        streamed = await client.post("/stream", headers={"Idempotency-Key": "s"})
        assert streamed.status_code == 200
        assert streamed.content == b"one,two"
        assert REPLAYED_HEADER not in streamed.headers
    assert calls["crash"] == calls["stream"] == 2
    assert rows(migrated) == []


async def test_same_key_for_a_different_request_is_rejected(
    client: httpx.AsyncClient, calls: Counter[str]
) -> None:
    assert (
        await client.post("/things", json={"name": "a"}, headers={"Idempotency-Key": "m"})
    ).status_code == 201
    other_body = await client.post("/things", json={"name": "b"}, headers={"Idempotency-Key": "m"})
    other_path = await client.post("/flaky", headers={"Idempotency-Key": "m"})
    for response in (other_body, other_path):
        assert response.status_code == 422
        assert response.headers["content-type"] == "application/problem+json"
        assert response.json()["code"] == "idempotency_key.mismatch"
    assert calls["things"] == 1
    assert calls["flaky"] == 0


async def test_key_length_and_form(client: httpx.AsyncClient, calls: Counter[str]) -> None:
    longest = "k" * 255
    assert (
        await client.post("/things", json={"name": "a"}, headers={"Idempotency-Key": longest})
    ).status_code == 201
    too_long = await client.post(
        "/things", json={"name": "a"}, headers={"Idempotency-Key": longest + "k"}
    )
    assert too_long.status_code == 400
    assert too_long.json()["code"] == "idempotency_key.invalid"
    assert (
        await client.post("/things", json={"name": "a"}, headers={"Idempotency-Key": "a b"})
    ).status_code == 400
    # The draft's Structured Field form and the bare form name the same key.
    quoted = await client.post(
        "/things", json={"name": "a"}, headers={"Idempotency-Key": f'"{longest}"'}
    )
    assert quoted.headers[REPLAYED_HEADER] == "true"
    assert calls["things"] == 1


async def test_credential_route_takes_no_key_and_stores_nothing(
    client: httpx.AsyncClient, calls: Counter[str], migrated: str
) -> None:
    refused = await client.post("/tokens", headers={"Idempotency-Key": "t"})
    assert refused.status_code == 400
    assert refused.json()["code"] == "idempotency_key.not_accepted"
    assert calls["tokens"] == 0
    issued = await client.post("/tokens")
    assert issued.status_code == 201
    assert rows(migrated) == []


async def test_keys_are_per_tenant_and_platform_requests_use_a_null_tenant(
    client: httpx.AsyncClient, calls: Counter[str], migrated: str
) -> None:
    headers = {"Idempotency-Key": "shared"}
    await client.post("/things", json={"name": "a"}, headers=headers)
    await client.post("/things", json={"name": "a"}, headers={**headers, "X-Tenant": str(TENANT_B)})
    del client.headers["X-Tenant"]  # a platform request
    for _ in range(2):
        await client.post("/things", json={"name": "a"}, headers=headers)
    assert calls["things"] == 3
    tenants = sorted(str(r[1]) for r in rows(migrated))
    assert tenants == sorted([str(TENANT_A), str(TENANT_B), "None"])


async def test_no_key_runs_every_time_unless_required(
    client: httpx.AsyncClient, calls: Counter[str], migrated: str
) -> None:
    for _ in range(2):
        assert (await client.post("/things", json={"name": "a"})).status_code == 201
    assert calls["things"] == 2
    assert rows(migrated) == []
    required = await client.post("/strict", json={"name": "a"})
    assert required.status_code == 400
    assert required.json()["code"] == "idempotency_key.required"


async def test_purge_deletes_rows_older_than_24h_and_expired_keys_run_again(
    client: httpx.AsyncClient, calls: Counter[str], migrated: str, app: FastAPI
) -> None:
    for key in ("old", "new"):
        await client.post("/things", json={"name": "a"}, headers={"Idempotency-Key": key})
    with psycopg.connect(migrated) as conn:
        conn.execute(
            f"UPDATE {TABLE} SET created_at = now() - interval '25 hours' WHERE key = 'old'"
        )
    # Past its retention a key is free again, before and after the purge.
    rerun = await client.post("/things", json={"name": "a"}, headers={"Idempotency-Key": "old"})
    assert REPLAYED_HEADER not in rerun.headers
    assert calls["things"] == 3
    with psycopg.connect(migrated) as conn:
        conn.execute(
            f"UPDATE {TABLE} SET created_at = now() - interval '25 hours' WHERE key = 'old'"
        )
        conn.execute(
            f"INSERT INTO {TABLE} (principal_id, tenant_id, key, request_hash, "
            "response_status, response_body, created_at) VALUES "
            "(%s, NULL, 'platform-old', '\\x00', 201, '', now() - interval '2 days')",
            (ALICE,),
        )
    assert await app.state.idempotency.purge(batch=1) == 2
    assert [r[0] for r in rows(migrated)] == ["new"]
