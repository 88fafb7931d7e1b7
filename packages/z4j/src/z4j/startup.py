"""Bringing a brain up: secrets, database, migrations, first admin, pool."""

from __future__ import annotations

import logging
import secrets as pysecrets
from collections.abc import Callable
from dataclasses import dataclass

from platformkit.db.pool import open_pool

from z4j import db
from z4j.brain import Brain
from z4j.secrets_file import BrainSecrets, load_or_create
from z4j.settings import Settings

log = logging.getLogger("z4j")


@dataclass
class Prepared:
    settings: Settings
    secrets: BrainSecrets
    admin_url: str
    created_secrets: bool


async def prepare(settings: Settings, say: Callable[[str], None] | None = None) -> Prepared:
    """Create secrets on first run, find or start the database (telling ``say`` of an embedded
    one), and migrate it."""
    brain_secrets, created = load_or_create(settings.config_dir)
    configured = settings.database_url.get_secret_value() if settings.database_url else None
    admin_url = db.resolve_admin_url(configured, say)
    applied = await db.migrator(brain_secrets).migrate(admin_url)
    if applied:
        log.info("applied migrations: %s", ", ".join(applied))
    return Prepared(settings, brain_secrets, admin_url, created)


async def open_brain(prepared: Prepared, max_size: int = 20) -> Brain:
    pool = await open_pool(
        db.app_url(prepared.admin_url, prepared.secrets), min_size=2, max_size=max_size, name="z4j"
    )
    return Brain(prepared.settings, prepared.secrets, pool)


def new_setup_token() -> str:
    return pysecrets.token_urlsafe(24)
