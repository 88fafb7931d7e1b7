"""Choose the database server: the configured one, or the embedded one started on demand."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from pathlib import Path

import psycopg
from psycopg import sql

from platformkit.db.embedded import DEFAULT_PORT, EmbeddedPostgres, default_data_dir
from platformkit.db.pool import database_name, with_database


def embedded_from_env() -> EmbeddedPostgres:
    """The shared embedded server: PLATFORMKIT_PG_DATA and PLATFORMKIT_PG_PORT override defaults."""
    data_dir = Path(os.environ.get("PLATFORMKIT_PG_DATA") or default_data_dir())
    port = int(os.environ.get("PLATFORMKIT_PG_PORT") or DEFAULT_PORT)
    return EmbeddedPostgres(data_dir=data_dir, port=port)


# What a server command says of an embedded server it started or found running.
OUTLIVES_COMMAND = "it keeps running after this command ends; `uv run stack down` stops it"


def admin_url_for(
    configured_url: str | None, database: str, say: Callable[[str], None] | None = None
) -> str:
    """Return the administrative URL of ``database``.

    With a configured URL that server is used as it is and nothing is started. Without one the
    embedded server is started (or reused) and ``database`` is created on it if missing; ``say``
    is then told where it runs and that it outlives the command.
    """
    if configured_url:
        return configured_url
    server = embedded_from_env()
    url = with_database(server.start(), database)
    ensure_database(url)
    if say is not None:
        say(f"embedded PostgreSQL at {url} (data {server.data_dir}); {OUTLIVES_COMMAND}")
    return url


def ensure_database(url: str) -> None:
    """Create the database named in ``url`` if it does not exist (needs CREATEDB)."""
    name = database_name(url)
    with psycopg.connect(with_database(url, "postgres"), autocommit=True) as conn:
        found = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone()
        if found is None:
            # Another process may create it concurrently.
            with contextlib.suppress(psycopg.errors.DuplicateDatabase):
                conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
