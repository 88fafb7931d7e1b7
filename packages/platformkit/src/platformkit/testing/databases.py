"""Fresh databases per test, cloned from migrated templates so each test starts fast and clean."""

from __future__ import annotations

import itertools
import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import psycopg
from psycopg import sql

from platformkit.db.pool import with_database

Migrate = Callable[[str], Awaitable[object]]


@dataclass
class DatabaseFactory:
    """Creates databases on one server: templates migrated once, clones per test."""

    admin_url: str
    _templates: dict[str, str] = field(default_factory=dict)
    _counter: itertools.count[int] = field(default_factory=itertools.count)

    def _admin(self) -> psycopg.Connection[tuple[object, ...]]:
        return psycopg.connect(self.admin_url, autocommit=True)

    def _new_name(self, stem: str) -> str:
        return f"t_{stem}_{os.getpid()}_{next(self._counter)}"

    async def template(self, name: str, migrate: Migrate) -> str:
        """Create and migrate template ``name`` once per test session; return its name."""
        if name in self._templates:
            return self._templates[name]
        db = f"tpl_{name}_{os.getpid()}"
        with self._admin() as conn:
            conn.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(db))
            )
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(db)))
        await migrate(with_database(self.admin_url, db))
        self._templates[name] = db
        return db

    def create(self, template: str | None = None, stem: str = "db") -> str:
        """Create an empty database, or a copy of ``template``; return its admin URL."""
        db = self._new_name(stem)
        query = sql.SQL("CREATE DATABASE {}").format(sql.Identifier(db))
        if template is not None:
            query = sql.SQL("CREATE DATABASE {} TEMPLATE {} STRATEGY FILE_COPY").format(
                sql.Identifier(db), sql.Identifier(template)
            )
        with self._admin() as conn:
            conn.execute(query)
        return with_database(self.admin_url, db)

    def drop(self, url: str) -> None:
        db = url.rsplit("/", 1)[1]
        with self._admin() as conn:
            conn.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(db))
            )
