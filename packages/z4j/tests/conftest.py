"""Fixtures for z4j's API, dashboard and auth tests.

One migrated template database per session; every test gets a fresh clone, a config dir of
its own (new brain secrets), and the real app with its lifespan run behind an httpx client.
``Seed`` creates users, projects, agents and tasks through the same actions the API uses.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
from asgi_lifespan import LifespanManager
from fastapi import FastAPI
from platformkit.passwords import FAST_TEST_POLICY
from platformkit.testing.databases import DatabaseFactory
from psycopg.types.json import Jsonb
from z4j import db
from z4j.actions import agents, projects, users
from z4j.actions.context import Ctx, User
from z4j.app import create_app
from z4j.brain import Brain
from z4j.secrets_file import load_or_create
from z4j.settings import Settings
from z4j.store import memberships
from z4j.store import users as user_store

PASSWORD = "correct horse battery"
BASE_URL = "http://testserver"


@pytest.fixture(scope="session", autouse=True)
def _fast_passwords() -> None:
    # argon2id at production cost takes ~100 ms a hash; tests hash hundreds of times.
    users.use_password_policy(FAST_TEST_POLICY)


@pytest.fixture(scope="session")
async def z4j_template(
    database_factory: DatabaseFactory, tmp_path_factory: pytest.TempPathFactory
) -> str:
    brain_secrets, _ = load_or_create(tmp_path_factory.mktemp("z4j-template"))

    async def migrate(url: str) -> object:
        return await db.migrator(brain_secrets).migrate(url)

    return await database_factory.template("z4j", migrate)


@pytest.fixture
def z4j_database(database_factory: DatabaseFactory, z4j_template: str) -> Iterator[str]:
    url = database_factory.create(z4j_template, stem="z4j")
    yield url
    database_factory.drop(url)


@pytest.fixture
def z4j_settings(z4j_database: str, tmp_path: Path) -> Settings:
    return Settings(database_url=z4j_database, config_dir=tmp_path / "config", public_url=BASE_URL)


@pytest.fixture
async def z4j_app(z4j_settings: Settings) -> AsyncIterator[FastAPI]:
    app = create_app(z4j_settings)
    async with LifespanManager(app):
        yield app


@pytest.fixture
def brain(z4j_app: FastAPI) -> Brain:
    value: Brain = z4j_app.state.brain
    return value


@pytest.fixture
async def client(z4j_app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=z4j_app)
    async with httpx.AsyncClient(transport=transport, base_url=BASE_URL) as http:
        yield http


@pytest.fixture
def seed(brain: Brain, z4j_app: FastAPI, z4j_database: str) -> Seed:
    return Seed(brain, z4j_app, z4j_database)


@dataclass
class Seed:
    """Creates what tests need through the actions, plus raw task rows through SQL."""

    brain: Brain
    app: FastAPI
    admin_url: str

    async def user(self, email: str, *, is_admin: bool = False) -> User:
        password_hash = await users.hash_in_thread(PASSWORD)
        async with self.brain.platform_tx() as conn:
            row = await user_store.create(conn, email, password_hash, is_admin=is_admin)
        assert row is not None
        return User.from_row(row)

    def ctx(self, user: User) -> Ctx:
        return Ctx(self.brain, user)

    async def project(self, owner: User, name: str | None = None) -> uuid.UUID:
        name = name or f"project-{uuid.uuid4().hex[:8]}"
        if owner.is_admin:
            row = await projects.create_project(self.ctx(owner), name)
            project_id: uuid.UUID = row["id"]
            return project_id
        async with self.brain.platform_tx() as conn:
            cur = await conn.execute(
                "INSERT INTO projects (id, name) VALUES (%s, %s) RETURNING id", (uuid.uuid4(), name)
            )
            found = await cur.fetchone()
            assert found is not None
            await memberships.add(conn, owner.id, found["id"], "owner")
        return uuid.UUID(str(found["id"]))

    async def member(self, project_id: uuid.UUID, user: User, role: str) -> None:
        async with self.brain.platform_tx() as conn:
            await memberships.add(conn, user.id, project_id, role)

    async def agent(
        self, owner: User, project_id: uuid.UUID, name: str = "workers"
    ) -> agents.CreatedAgent:
        return await agents.create_agent(self.ctx(owner), project_id, name, BASE_URL)

    @asynccontextmanager
    async def signed_in(self, email: str) -> AsyncIterator[httpx.AsyncClient]:
        """A client with a session of the user ``email``."""
        transport = httpx.ASGITransport(app=self.app)
        async with httpx.AsyncClient(transport=transport, base_url=BASE_URL) as http:
            response = await http.post(
                "/api/v1/auth/login", json={"email": email, "password": PASSWORD}
            )
            assert response.status_code == 200, response.text
            yield http

    def tasks(self, project_id: uuid.UUID, rows: list[dict[str, Any]]) -> list[uuid.UUID]:
        """Insert task rows (defaults filled in) as the administrator; returns their ids."""
        ids = []
        base = datetime(2026, 1, 1, tzinfo=UTC)
        with psycopg.connect(self.admin_url) as conn:
            for i, row in enumerate(rows):
                task_id = row.get("id") or uuid.uuid4()
                created = row.get("created_at") or base + timedelta(seconds=i)
                conn.execute(
                    "INSERT INTO tasks (id, project_id, agent_id, engine, engine_task_id, name, "
                    "queue, state, args_redacted, kwargs_redacted, error, enqueued_at, "
                    "created_at, updated_at, worker, runtime_ms) VALUES (%s, %s, %s, 'celery', "
                    "%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
                    (
                        task_id,
                        project_id,
                        row.get("agent_id"),
                        row.get("engine_task_id", str(task_id)),
                        row.get("name", "app.tasks.add"),
                        row.get("queue", "celery"),
                        row.get("state", "succeeded"),
                        Jsonb(row.get("args", [1, 2])),
                        Jsonb(row.get("kwargs", {})),
                        Jsonb(row["error"]) if row.get("error") else None,
                        row.get("enqueued_at", created),
                        created,
                        created,
                        row.get("worker"),
                        row.get("runtime_ms"),
                    ),
                )
                ids.append(task_id)
        return ids
