"""Opening the analytics store for a gateway: the configured ClickHouse server or chDB, with the
DDL applied (idempotent), or nothing when it cannot be opened (another process owns chDB's data
directory): the gateway then serves without analytics and its queries answer AB-9005."""

from __future__ import annotations

import logging

from agentbus.analytics.backends import AnalyticsUnavailable, Backend, open_backend
from agentbus.analytics.schema import Layout, statements
from agentbus.gateway.config import GatewaySettings

log = logging.getLogger(__name__)


async def apply_schema(backend: Backend, layout: Layout | None = None) -> None:
    for statement in statements(layout or Layout()):
        await backend.command(statement)


def layout_of(settings: GatewaySettings) -> Layout:
    return Layout(cluster=settings.analytics_cluster, tiered=settings.analytics_tiered)


async def open_analytics(settings: GatewaySettings) -> Backend | None:
    if not settings.analytics:
        return None
    url = settings.analytics_url.get_secret_value() if settings.analytics_url else None
    try:
        backend = open_backend(url, settings.resolved_analytics_dir)
    except AnalyticsUnavailable as exc:
        log.warning("analytics off in this process: %s", exc)
        return None
    try:
        await apply_schema(backend, layout_of(settings))
    except Exception:
        await backend.close()
        raise
    return backend
