"""Async connection pools (psycopg 3 + psycopg_pool) and database URL helpers."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote, urlsplit, urlunsplit

from psycopg import AsyncConnection
from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool


def with_database(url: str, database: str) -> str:
    """Return ``url`` pointing at another database on the same server."""
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path="/" + quote(database)))


def with_user(url: str, user: str, password: str | None = None) -> str:
    """Return ``url`` with another login role (and password, if any) on the same server."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    netloc = quote(user, safe="")
    if password:
        netloc += ":" + quote(password, safe="")
    netloc += "@" + host + (f":{parts.port}" if parts.port else "")
    return urlunsplit(parts._replace(netloc=netloc))


def database_name(url: str) -> str:
    return urlsplit(url).path.lstrip("/") or "postgres"


async def _configure(conn: AsyncConnection[Any]) -> None:
    # Times are timestamptz in UTC everywhere; make the session agree so text output does too.
    await conn.execute("SET TIME ZONE 'UTC'")
    await conn.commit()


async def open_pool(
    url: str,
    *,
    min_size: int = 1,
    max_size: int = 10,
    name: str | None = None,
    open_timeout: float = 30.0,
    wait_timeout: float | None = None,
) -> AsyncConnectionPool[AsyncConnection[dict[str, Any]]]:
    """Open a pool of autocommit connections returning dict rows.

    Connections are autocommit so a read outside ``conn.transaction()`` never leaves a session
    idle in transaction; writes and tenant-scoped work open an explicit transaction. A caller
    waits at most ``wait_timeout`` for a connection (``open_timeout`` when None), then gets
    ``PoolTimeout``: while the server is away, requests fail after that instead of hanging.
    """
    pool: AsyncConnectionPool[AsyncConnection[dict[str, Any]]] = AsyncConnectionPool(
        url,
        min_size=min_size,
        max_size=max_size,
        name=name,
        timeout=open_timeout if wait_timeout is None else wait_timeout,
        open=False,
        configure=_configure,
        kwargs={"autocommit": True, "row_factory": dict_row},
        connection_class=AsyncConnection[dict[str, Any]],
    )
    await pool.open(wait=True, timeout=open_timeout)
    return pool
