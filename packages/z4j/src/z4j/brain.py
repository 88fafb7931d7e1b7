"""What a running brain holds: settings, secrets, the pool, and live agent sessions."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Protocol

from platformkit.db.scope import Conn, Pool, platform_transaction, tenant_transaction
from platformkit.mail import Mailer, mailer_for
from platformkit.signin import SignInThrottle
from platformkit.tokens import HmacTokenHasher, TokenFormat

from z4j.db import SCOPE
from z4j.secrets_file import BrainSecrets
from z4j.settings import Settings

CHANGES_CHANNEL = "z4j_changes"
SIGN_IN_TABLE = "sign_in_throttle"
AGENT_TOKEN = TokenFormat.encoded("z4ja_", nbytes=32, encoding="urlsafe")
INVITATION_TOKEN = TokenFormat.encoded("z4ji_", nbytes=32, encoding="urlsafe")
RESET_TOKEN = TokenFormat.encoded("z4jr_", nbytes=32, encoding="urlsafe")
API_KEY = TokenFormat.encoded("z4jk_", nbytes=32, encoding="urlsafe")


class LiveSession(Protocol):
    async def close(self, code: int, reason: str) -> None: ...


@dataclass
class Brain:
    settings: Settings
    secrets: BrainSecrets
    pool: Pool
    # (agent id, worker id) -> the connection serving it; a reconnect replaces the old one.
    live: dict[tuple[uuid.UUID, str], LiveSession] = field(default_factory=dict)
    changes: asyncio.Condition = field(default_factory=asyncio.Condition)
    # agent id -> wake-up events of this process's connections of that agent, set when a
    # command for it is queued (z4j.controllers.commands)
    command_wakers: dict[uuid.UUID, set[asyncio.Event]] = field(default_factory=dict)
    # failed sign-ins per account and address, in the database (platformkit.signin)
    sign_in: SignInThrottle = field(default_factory=lambda: SignInThrottle(SIGN_IN_TABLE))

    @property
    def token_hasher(self) -> HmacTokenHasher:
        return HmacTokenHasher(self.secrets.token_key)

    @property
    def mailer(self) -> Mailer:
        s = self.settings
        return mailer_for(
            outbox=s.outbox_dir or s.config_dir / "outbox",
            sender=s.mail_from,
            smtp_host=s.smtp_host,
            smtp_port=s.smtp_port,
            security=s.smtp_security,
            username=s.smtp_username,
            password=s.smtp_password.get_secret_value() if s.smtp_password else None,
        )

    @asynccontextmanager
    async def project_tx(self, project_id: uuid.UUID) -> AsyncIterator[Conn]:
        async with tenant_transaction(self.pool, SCOPE, project_id) as conn:
            yield conn

    @asynccontextmanager
    async def platform_tx(self) -> AsyncIterator[Conn]:
        async with platform_transaction(self.pool, SCOPE) as conn:
            yield conn

    async def notify_change(self) -> None:
        """Tell every brain process that something dashboards show may have changed.

        The signal goes through PostgreSQL (NOTIFY), so a stream served by one worker process
        hears about events ingested by another; ``controllers.changes`` turns it back into a
        wake-up of ``changes`` in each process.
        """
        async with self.pool.connection() as conn:
            await signal_change(conn)

    async def wake_streams(self) -> None:
        async with self.changes:
            self.changes.notify_all()


async def signal_change(conn: Conn) -> None:
    """``Brain.notify_change`` on ``conn``: inside a transaction it is sent when that commits."""
    await conn.execute("SELECT pg_notify(%s, '')", (CHANGES_CHANNEL,))
