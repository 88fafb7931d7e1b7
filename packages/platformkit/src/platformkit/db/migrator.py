"""Forward-only SQL migrations, recorded with checksums in ``schema_migrations``.

A system keeps numbered files (``0001_initial.sql``, ``0002_...``) next to the code that owns the
tables. ``migrate`` takes a session advisory lock keyed by the system name, so of two migrators
started at once one applies and the other waits, then finds nothing left to do. Each file runs
in its own transaction as the system's owner role, and its SHA-256 is recorded; a file edited
after it was applied is refused rather than silently skipped.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql

from platformkit.db.roles import RoleSpec, ensure_roles

_FILE_RE = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")

_CREATE_TABLE = """
CREATE TABLE IF NOT EXISTS public.schema_migrations (
    component  text        NOT NULL,
    version    integer     NOT NULL,
    name       text        NOT NULL,
    checksum   text        NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (component, version)
)
"""


class MigrationError(RuntimeError):
    """The database and the migration files disagree; nothing further was applied."""

    code = "database.migration"  # what a command line prints (wirekit.clierrors)


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    sql: str

    @property
    def checksum(self) -> str:
        return hashlib.sha256(self.sql.encode()).hexdigest()

    @property
    def label(self) -> str:
        return f"{self.version:04d}_{self.name}"


@dataclass(frozen=True)
class Source:
    """One ordered list of migrations, recorded under ``component`` (a system, or 'absurd')."""

    component: str
    migrations: Sequence[Migration]


def load_directory(component: str, directory: Traversable | Path) -> Source:
    """Read ``NNNN_name.sql`` files; any other ``.sql`` name or a repeated number is an error."""
    found: dict[int, Migration] = {}
    for entry in directory.iterdir():
        if not entry.name.endswith(".sql"):
            continue
        match = _FILE_RE.match(entry.name)
        if match is None:
            raise MigrationError(f"{entry.name}: migration files are named NNNN_lower_name.sql")
        version = int(match.group(1))
        if version in found:
            raise MigrationError(f"{entry.name}: version {version} is used twice")
        found[version] = Migration(version, match.group(2), entry.read_text(encoding="utf-8"))
    return Source(component, [found[v] for v in sorted(found)])


def lock_key(system: str) -> int:
    """A stable signed 64-bit advisory lock key for ``system``."""
    digest = hashlib.sha256(f"platformkit.migrate:{system}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


@dataclass
class Migrator:
    """Applies a system's sources to one database, as the system's owner role."""

    system: str
    sources: Sequence[Source]
    roles: RoleSpec
    extensions: Sequence[str] = ()
    on_progress: Callable[[str], None] = field(default=lambda _msg: None)

    async def migrate(self, admin_url: str) -> list[str]:
        """Apply what is pending and return the labels applied (empty when up to date)."""
        async with await psycopg.AsyncConnection.connect(admin_url, autocommit=True) as conn:
            await conn.execute("SELECT pg_advisory_lock(%s)", (lock_key(self.system),))
            try:
                await ensure_roles(conn, self.roles)
                for ext in self.extensions:
                    await conn.execute(
                        sql.SQL("CREATE EXTENSION IF NOT EXISTS {}").format(sql.Identifier(ext))
                    )
                async with conn.transaction():
                    await self._as_owner(conn)
                    await conn.execute(_CREATE_TABLE)
                applied: list[str] = []
                for source in self.sources:
                    applied += await self._apply_source(conn, source)
                return applied
            finally:
                await conn.execute("SELECT pg_advisory_unlock(%s)", (lock_key(self.system),))

    async def pending(self, admin_url: str) -> list[str]:
        """Labels not yet applied (checksums of applied files are verified too)."""
        async with await psycopg.AsyncConnection.connect(admin_url, autocommit=True) as conn:
            exists = await (
                await conn.execute("SELECT to_regclass('public.schema_migrations') IS NOT NULL")
            ).fetchone()
            out: list[str] = []
            for source in self.sources:
                done = await self._applied(conn, source.component) if exists and exists[0] else {}
                self._check(source, done)
                out += [
                    f"{source.component}:{m.label}"
                    for m in source.migrations
                    if m.version not in done
                ]
            return out

    async def _as_owner(self, conn: psycopg.AsyncConnection[Any]) -> None:
        await conn.execute(sql.SQL("SET LOCAL ROLE {}").format(sql.Identifier(self.roles.owner)))

    async def _applied(self, conn: psycopg.AsyncConnection[Any], component: str) -> dict[int, str]:
        cur = await conn.execute(
            "SELECT version, checksum FROM public.schema_migrations WHERE component = %s",
            (component,),
        )
        return {int(v): str(c) for v, c in await cur.fetchall()}

    def _check(self, source: Source, done: dict[int, str]) -> None:
        known = {m.version: m for m in source.migrations}
        for version, checksum in sorted(done.items()):
            migration = known.get(version)
            if migration is None:
                raise MigrationError(
                    f"{source.component}: version {version} is applied in the database but has "
                    "no file here; this code is older than the database"
                )
            if migration.checksum != checksum:
                raise MigrationError(
                    f"{source.component}: {migration.label}.sql was edited after it was applied "
                    "(checksum differs); add a new migration instead"
                )

    async def _apply_source(self, conn: psycopg.AsyncConnection[Any], source: Source) -> list[str]:
        done = await self._applied(conn, source.component)
        self._check(source, done)
        applied = []
        for migration in source.migrations:
            if migration.version in done:
                continue
            label = f"{source.component}:{migration.label}"
            self.on_progress(label)
            try:
                async with conn.transaction():
                    await self._as_owner(conn)
                    await conn.execute(migration.sql.encode())
                    await conn.execute(
                        "INSERT INTO public.schema_migrations (component, version, name, checksum)"
                        " VALUES (%s, %s, %s, %s)",
                        (source.component, migration.version, migration.name, migration.checksum),
                    )
            except psycopg.Error as exc:
                raise MigrationError(f"{label} failed: {exc}") from exc
            applied.append(label)
        return applied
