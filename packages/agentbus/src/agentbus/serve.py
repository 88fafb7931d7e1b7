"""What ``agentbus-gateway serve`` does: make the dependencies ready, then run granian.

Before any worker starts, once: the database (the configured one, or the embedded PostgreSQL
with an ``agentbus`` database) is migrated, and NATS is the configured server or the embedded
one on ``nats_port`` (44222), started if it is not running. The resolved URLs are handed to the
workers through the environment, where ``GatewaySettings`` reads them; each worker's lifespan
then opens its pool and connections (and creates the first signing key if there is none).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable

from platformkit.http import serve as serve_app
from platformkit.nats.embedded import EmbeddedNats

from agentbus import db
from agentbus.gateway.config import GatewaySettings

APP_FACTORY = "agentbus.gateway.app:create_app"


def _secret(value: object) -> str | None:
    get = getattr(value, "get_secret_value", None)
    return None if get is None else str(get())


def prepare(
    settings: GatewaySettings, say: Callable[[str], None] = lambda _line: None
) -> tuple[str, str]:
    """Migrate the database and make sure NATS runs; ``(admin URL, NATS URL)``."""
    admin_url = db.resolve_admin_url(_secret(settings.database_url))
    migrator = db.migrator(
        _secret(settings.app_password), on_progress=lambda s: say(f"applying {s}")
    )
    asyncio.run(migrator.migrate(admin_url))
    nats_url = settings.nats_url
    if nats_url is None:
        nats_url = EmbeddedNats(port=settings.nats_port).start()
        say(f"embedded NATS JetStream at {nats_url}")
    return admin_url, nats_url


def serve(settings: GatewaySettings, say: Callable[[str], None] = lambda _line: None) -> int:
    admin_url, nats_url = prepare(settings, say)
    os.environ["AGENTBUS_DATABASE_URL"] = admin_url
    os.environ["AGENTBUS_NATS_URL"] = nats_url
    os.environ["AGENTBUS_CONFIG_DIR"] = str(settings.config_dir)
    say(f"AgentBus gateway on http://{settings.host}:{settings.port}")
    return serve_app(APP_FACTORY, settings.host, settings.port, settings.workers, factory=True)
