"""Client pieces that need no gateway: problem+json mapping, routes, unreachable, clock."""

from __future__ import annotations

from datetime import timedelta
from email.utils import format_datetime

import httpx
import pytest
from agentbus_sidecar.client import GatewayClient, problem_error, route_for
from agentbus_sidecar.clock import utcnow
from agentbus_sidecar.errors import GatewayUnreachable

PROBLEM = {
    "type": "https://agentbus.exchange/errors/AB-3002",
    "title": "Recipient not found",
    "status": 404,
    "detail": "no agent at agent://acme/platform/nobody",
    "code": "AB-3002",
    "name": "recipient_not_found",
    "request_id": "r1",
}


def _response(status: int, **kwargs: object) -> httpx.Response:
    return httpx.Response(status, request=httpx.Request("POST", "http://gw/v1/messages"), **kwargs)  # type: ignore[arg-type]


def test_problem_documents_map_to_gateway_errors() -> None:
    headers = {"Content-Type": "application/problem+json"}
    error = problem_error(_response(404, json=PROBLEM, headers=headers))
    assert (error.status, error.code, error.name) == (404, "AB-3002", "recipient_not_found")
    assert error.detail == PROBLEM["detail"]
    assert str(error) == "AB-3002 recipient_not_found: no agent at agent://acme/platform/nobody"
    assert not error.retryable
    assert error.problem["request_id"] == "r1"


def test_rate_limits_and_outages_are_retryable() -> None:
    limited = problem_error(
        _response(
            429, json={"code": "AB-5003", "detail": "slow down"}, headers={"Retry-After": "3"}
        )
    )
    assert limited.retryable
    assert limited.retry_after_ms == 3000
    hinted = problem_error(_response(503, json={"code": "AB-9002", "retry_after_ms": 1500}))
    assert hinted.retryable
    assert hinted.retry_after_ms == 1500
    html = problem_error(_response(502, text="<html>bad gateway</html>"))
    assert html.retryable
    assert html.code is None
    assert str(html).startswith("HTTP 502")


@pytest.mark.parametrize(
    ("code", "renew"), [("AB-1005", True), ("AB-1006", True), ("AB-1002", False)]
)
def test_only_credential_failures_trigger_a_renewal(code: str, renew: bool) -> None:
    assert problem_error(_response(401, json={"code": code})).credential_rejected is renew


@pytest.mark.parametrize(
    ("status", "code", "caller"),
    [(401, "AB-1003", True), (401, "AB-1012", True), (403, "AB-1007", True),
     (403, "AB-2013", False), (404, "AB-3002", False), (401, None, False)],
)  # fmt: skip
def test_refusals_of_the_caller_are_told_from_refusals_of_the_envelope(
    status: int, code: str | None, caller: bool
) -> None:
    error = problem_error(_response(status, json={"code": code} if code else {}))
    assert error.caller_refused is caller
    assert error.clock_skew is (code == "AB-1012")


def test_routes_follow_the_envelope_type() -> None:
    assert route_for({"type": "agentbus.message.v1"}) == "/v1/messages"
    assert route_for({"type": "agentbus.task.request.v1"}) == "/v1/tasks"
    lifecycle = {"type": "agentbus.task.complete.v1", "subject": "tsk_" + "a" * 32}
    assert route_for(lifecycle) == f"/v1/tasks/tsk_{'a' * 32}/complete"


async def test_no_answer_is_gateway_unreachable(dead_gateway: str) -> None:
    client = GatewayClient(dead_gateway)
    try:
        with pytest.raises(GatewayUnreachable, match=dead_gateway):
            await client.healthz()
    finally:
        await client.aclose()


async def test_the_date_header_sets_the_clock_offset() -> None:
    offsets: list[int] = []
    client = GatewayClient("http://127.0.0.1:1", on_clock_offset=offsets.append)
    date = format_datetime(utcnow() + timedelta(seconds=120), usegmt=True)
    now = utcnow().timestamp()
    client._observe_clock(_response(200, headers={"Date": date}), now, now)
    await client.aclose()
    assert 118_500 <= offsets[0] <= 121_500
