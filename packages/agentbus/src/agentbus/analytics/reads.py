"""The analytics reads of the API and the console: the tenant's operators only (a token with
``read_audit`` or ``admin``, not bound to a workspace: the answers span the tenant), the tenant
taken from the credential, never from the request. A conversation of another tenant is AB-8002,
as one that does not exist. No analytics store in this process, or one that fails, is AB-9005."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Awaitable
from datetime import UTC, datetime, timedelta
from typing import Any

from agentbus.analytics import queries
from agentbus.analytics.backends import Backend
from agentbus.errors import AnalyticsUnavailable, NotFound, RequestInvalid
from agentbus.gateway.context import Gateway
from agentbus.ids import InvalidId, format_id, parse_id

log = logging.getLogger(__name__)
WINDOW_MAX = timedelta(days=400)
DEFAULT_WINDOW = timedelta(days=30)
# The span ClickHouse's DateTime64 holds; a bound outside it is refused rather than sent.
EARLIEST = datetime(1900, 1, 1, tzinfo=UTC)
LATEST = datetime(2299, 12, 31, 23, 59, 59, tzinfo=UTC)


def backend_of(gw: Gateway) -> Backend:
    if gw.analytics is None:
        raise AnalyticsUnavailable("this process holds no analytics store; retry on its owner")
    return gw.analytics


async def _ask[T](call: Awaitable[T]) -> T:
    try:
        return await call
    except Exception as exc:
        log.exception("analytics query failed")
        raise AnalyticsUnavailable("the analytics store did not answer") from exc


def window(since: datetime | None, until: datetime | None) -> tuple[datetime, datetime]:
    """``[since, until)``, by default the last 30 days; at most 400 days, within the years
    1900 to 2299."""
    try:
        until = (until or datetime.now(UTC)).astimezone(UTC)
        since = (since or until - DEFAULT_WINDOW).astimezone(UTC)
    except OverflowError:
        raise RequestInvalid("since and until must fall between 1900 and 2299") from None
    if not (EARLIEST <= since <= LATEST and EARLIEST <= until <= LATEST):
        raise RequestInvalid("since and until must fall between 1900 and 2299")
    if since >= until or until - since > WINDOW_MAX:
        raise RequestInvalid("since must come before until, at most 400 days apart")
    return since, until


def _agt(value: str | None) -> str | None:
    return None if value in (None, "", "\\N") else format_id("agt", uuid.UUID(value))


async def trace(gw: Gateway, tenant_id: uuid.UUID, conversation: str) -> dict[str, Any]:
    try:
        cnv = parse_id("cnv", conversation)
    except InvalidId:
        raise NotFound("no such conversation") from None
    found = await _ask(queries.conversation_trace(backend_of(gw), tenant_id, cnv))
    if found is None:
        raise NotFound("no such conversation")
    for hop in found["hops"]:
        hop["message_id"] = format_id("msg", uuid.UUID(hop["message_id"]))
        hop["from_agent_id"] = _agt(hop["from_agent_id"])
        hop["to_agent_id"] = _agt(hop["to_agent_id"])
        if hop["task_id"]:
            hop["task_id"] = format_id("tsk", uuid.UUID(hop["task_id"]))
    return {"conversation_id": format_id("cnv", cnv), **found}


async def cost(
    gw: Gateway, tenant_id: uuid.UUID, by: str, since: datetime | None, until: datetime | None
) -> dict[str, Any]:
    if by not in queries.COST_BY:
        raise RequestInvalid(f"by is one of {', '.join(queries.COST_BY)}")
    lo, hi = window(since, until)
    rows = await _ask(queries.cost(backend_of(gw), tenant_id, by, lo, hi))
    prefix = {"agent": "agt", "task": "tsk"}.get(by)
    for row in rows:
        if prefix is not None:
            row["key"] = format_id(prefix, uuid.UUID(row["key"]))
    return {"by": by, "since": lo.isoformat(), "until": hi.isoformat(), "rows": rows}


async def graph(
    gw: Gateway, tenant_id: uuid.UUID, since: datetime | None, until: datetime | None
) -> dict[str, Any]:
    lo, hi = window(since, until)
    found = await _ask(queries.talk_graph(backend_of(gw), tenant_id, lo, hi))
    for node in found["nodes"]:
        node["id"] = _agt(node["id"])
    for edge in found["edges"]:
        edge["source"], edge["target"] = _agt(edge["source"]), _agt(edge["target"])
    return {"since": lo.isoformat(), "until": hi.isoformat(), **found}


async def latency(
    gw: Gateway,
    tenant_id: uuid.UUID,
    since: datetime | None,
    until: datetime | None,
    slo_ms: int | None,
) -> dict[str, Any]:
    lo, hi = window(since, until)
    slo = slo_ms or gw.settings.delivery_slo_ms
    stages = await _ask(queries.latency(backend_of(gw), tenant_id, lo, hi, slo))
    return {"since": lo.isoformat(), "until": hi.isoformat(), "slo_ms": slo, "stages": stages}
