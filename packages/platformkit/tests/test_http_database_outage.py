"""An unreachable database answers as the system's 503 problem, not as a crash: connection
errors, shutdowns and pool timeouts do; failing statements stay what they are (a 500)."""

from __future__ import annotations

import httpx
import psycopg
import pytest
from platformkit.db.outage import database_unreachable
from platformkit.http import ProblemError, install
from prometheus_client import CollectorRegistry
from psycopg import errors
from psycopg_pool import PoolTimeout
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route


class StoreDown(ProblemError):
    type_base = "https://errors.example.test/"
    code, status, title = "X-9002", 503, "Database unavailable"


@pytest.mark.parametrize(
    ("exc", "unreachable"),
    [
        (psycopg.OperationalError("server closed the connection unexpectedly"), True),
        (errors.ConnectionFailure("connection to server lost"), True),
        (errors.AdminShutdown("terminating connection due to administrator command"), True),
        (errors.CannotConnectNow("the database system is starting up"), True),
        (PoolTimeout("couldn't get a connection after 5.00 sec"), True),
        (errors.QueryCanceled("canceling statement due to statement timeout"), False),
        (errors.SerializationFailure("could not serialize access"), False),
        (errors.UniqueViolation("duplicate key"), False),
        (ValueError("not a database error"), False),
    ],
)
def test_what_counts_as_unreachable(exc: BaseException, unreachable: bool) -> None:
    assert database_unreachable(exc) is unreachable


def _app() -> Starlette:
    failures: dict[str, Exception] = {
        "lost": psycopg.OperationalError("server closed the connection unexpectedly"),
        "pool": PoolTimeout("couldn't get a connection after 5.00 sec at 10.0.0.7"),
        "cancelled": errors.QueryCanceled("canceling statement due to statement timeout"),
    }

    async def fail(request: Request) -> Response:
        raise failures[request.path_params["kind"]]

    app = Starlette(routes=[Route("/fail/{kind}", fail)])
    install(app, registry=CollectorRegistry(), database_unavailable=lambda: StoreDown())
    return app


@pytest.mark.parametrize("kind", ["lost", "pool"])
async def test_an_unreachable_database_is_the_systems_503(kind: str) -> None:
    transport = httpx.ASGITransport(app=_app())
    async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
        reply = await client.get(f"/fail/{kind}")
    assert reply.status_code == 503
    assert reply.headers["content-type"] == "application/problem+json"
    assert reply.json()["code"] == "X-9002"
    assert "10.0.0.7" not in reply.text
    assert "server closed" not in reply.text


async def test_a_failing_statement_stays_a_500_without_internals() -> None:
    transport = httpx.ASGITransport(app=_app(), raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
        reply = await client.get("/fail/cancelled")
    assert reply.status_code == 500
    assert "statement timeout" not in reply.text
