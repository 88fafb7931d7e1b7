"""What ``agentbus-gateway serve`` does: make the dependencies ready, then run granian.

Before any worker starts, once: the database (the configured one, or the embedded PostgreSQL
with an ``agentbus`` database) is migrated, and NATS is the configured server or the embedded
one on ``nats_port`` (44222), started if it is not running. The resolved URLs are handed to the
workers through the environment, where ``GatewaySettings`` reads them; each worker's lifespan
then opens its pool and connections (and creates the first signing key if there is none). A
keyring that did not wrap the database's signing keys stops it before that
(``signing.KeyringMismatch``), with what to do about it.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable

import psycopg
from platformkit.db.server import OUTLIVES_COMMAND
from platformkit.http import serve as serve_app
from platformkit.http.serve import DRAIN_GRACE_S
from platformkit.nats.embedded import EmbeddedNats

from agentbus import db
from agentbus.gateway.actions.payloads import INLINE_MAX_BYTES
from agentbus.gateway.actions.signing import check_keyring, wrapped_keys
from agentbus.gateway.config import GatewaySettings

APP_FACTORY = "agentbus.gateway.app:create_app"


def _secret(value: object) -> str | None:
    get = getattr(value, "get_secret_value", None)
    return None if get is None else str(get())


def prepare(
    settings: GatewaySettings, say: Callable[[str], None] = lambda _line: None
) -> tuple[str, str]:
    """Migrate the database and make sure NATS runs; ``(admin URL, NATS URL)``."""
    admin_url = db.resolve_admin_url(_secret(settings.database_url), say)
    migrator = db.migrator(
        _secret(settings.app_password), on_progress=lambda s: say(f"applying {s}")
    )
    asyncio.run(migrator.migrate(admin_url))
    check_keyring(asyncio.run(_wrapped_keys(admin_url)), settings.resolved_keyring_path)
    nats_url = settings.nats_url
    if nats_url is None:
        nats = EmbeddedNats(port=settings.nats_port)
        if settings.nats_store is not None:
            nats.store_dir = settings.nats_store
        nats_url = nats.start()
        say(f"embedded NATS JetStream at {nats_url} (store {nats.store_dir}); {OUTLIVES_COMMAND}")
    return admin_url, nats_url


async def _wrapped_keys(admin_url: str) -> list[tuple[str, bytes]]:
    async with await psycopg.AsyncConnection.connect(admin_url, autocommit=True) as conn:
        return await wrapped_keys(conn)


def payloads_line(settings: GatewaySettings) -> str:
    """Where the gateway keeps payloads, and whether small ones also travel inline."""
    where = settings.object_store_url or str(settings.objects_dir)
    limit = f"{INLINE_MAX_BYTES // 1024} KiB"
    inline = f", and inline in JetStream under {limit}" if settings.inline_payloads else ""
    return f"payloads in {where}{inline}"


def analytics_line(settings: GatewaySettings) -> str:
    """Where analytics go, and the one-owner rule of chDB (docs/decisions/0050)."""
    if not settings.analytics:
        return "analytics off in these workers: the outbox keeps its rows for an owner process"
    if settings.analytics_url is not None:
        return "analytics in the configured ClickHouse server"
    where = f"analytics in chDB at {settings.resolved_analytics_dir}"
    if settings.workers > 1:
        where += (
            "; chDB has one owner process, so one worker ingests and answers analytics "
            "(the others answer AB-9005): configure AGENTBUS_ANALYTICS_URL for several"
        )
    return where


def serve(settings: GatewaySettings, say: Callable[[str], None] = lambda _line: None) -> int:
    admin_url, nats_url = prepare(settings, say)
    os.environ["AGENTBUS_DATABASE_URL"] = admin_url
    os.environ["AGENTBUS_NATS_URL"] = nats_url
    os.environ["AGENTBUS_CONFIG_DIR"] = str(settings.config_dir)
    base = (settings.public_url or f"http://{settings.host}:{settings.port}").rstrip("/")
    say(f"AgentBus gateway on http://{settings.host}:{settings.port}")
    say(f"console: {base}/console (sign-in links: agentbus-gateway admin users console-link)")
    say(payloads_line(settings))
    say(analytics_line(settings))
    return serve_app(
        APP_FACTORY, settings.host, settings.port, settings.workers, factory=True,
        drain_grace_s=DRAIN_GRACE_S,  # the gateway answers polls and closes sockets on the drain
        runtime_mode="st",  # granian's single-threaded Rust runtime per worker: decisions/0017
    )  # fmt: skip
