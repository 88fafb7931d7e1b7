"""Test helpers: a real brain server on a free port, backed by a fresh database.

Registered as a pytest plugin (entry point ``pytest11``): its fixtures serve every test.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from platformkit.db.pool import open_pool
from platformkit.testing.databases import DatabaseFactory
from platformkit.testing.services import free_port
from platformkit.tokens import mint_token
from z4j_agent.protocol import encode_secret

from z4j import db
from z4j.brain import AGENT_TOKEN
from z4j.secrets_file import load_or_create


@dataclass
class BrainProcess:
    """A ``z4j serve`` subprocess; restartable, killable, with direct database access."""

    admin_url: str
    config_dir: Path
    port: int
    log_path: Path
    proc: subprocess.Popen[bytes] | None = None
    env: dict[str, str] = field(default_factory=dict)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 120.0) -> None:
        """Start ``z4j serve`` and wait until it answers (a busy machine may take a minute); one
        that never does is killed before the error is raised."""
        env = {
            **os.environ,
            "Z4J_DATABASE_URL": self.admin_url,
            "Z4J_CONFIG_DIR": str(self.config_dir),
            "Z4J_PORT": str(self.port),
            **self.env,
        }
        with self.log_path.open("ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "z4j.cli", "serve"],
                env=env,
                stdout=log,
                stderr=log,
                start_new_session=True,
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"brain exited: {self.log_path.read_text()[-3000:]}")
            try:
                if httpx.get(f"{self.url}/api/v1/openapi.json", timeout=1).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        self.stop(signal.SIGKILL)
        raise RuntimeError(f"brain did not start: {self.log_path.read_text()[-3000:]}")

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        os.killpg(self.proc.pid, sig)
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)

    async def create_admin(self, email: str, password: str) -> bool:
        """Create the first admin through the action ``z4j serve`` runs for Z4J_ADMIN_EMAIL (the
        running brain has migrated the database); False if the email exists."""
        from z4j.actions import users
        from z4j.settings import Settings
        from z4j.startup import Prepared, open_brain

        settings = Settings(
            database_url=self.admin_url,
            config_dir=self.config_dir,
            public_url=self.url,
        )
        brain_secrets, _ = load_or_create(self.config_dir)
        prepared = Prepared(settings, brain_secrets, self.admin_url, False)
        brain = await open_brain(prepared, max_size=2)
        try:
            return await users.create_first_admin(brain, email, password)
        finally:
            await brain.pool.close()

    async def new_agent(self, name: str | None = None) -> dict[str, Any]:
        """Create a project and an agent directly in the database; return what an operator
        would paste into the agent's environment."""
        brain_secrets, _ = load_or_create(self.config_dir)
        from platformkit.tokens import HmacTokenHasher

        minted = mint_token(AGENT_TOKEN, HmacTokenHasher(brain_secrets.token_key))
        project_id, agent_id = uuid.uuid4(), uuid.uuid4()
        pool = await open_pool(self.admin_url, min_size=1, max_size=1)
        try:
            async with pool.connection() as conn:
                await conn.execute(
                    "INSERT INTO projects (id, name) VALUES (%s, %s)",
                    (project_id, f"p-{project_id.hex[:8]}"),
                )
                await conn.execute(
                    "INSERT INTO agents (id, project_id, name, token_hash) VALUES (%s,%s,%s,%s)",
                    (agent_id, project_id, name or "agent", minted.hash),
                )
        finally:
            await pool.close()
        return {
            "project_id": project_id,
            "agent_id": agent_id,
            "token": minted.plaintext,
            "hmac_secret": encode_secret(brain_secrets.project_secret(project_id)),
            "secret": brain_secrets.project_secret(project_id),
        }


async def z4j_template(database_factory: DatabaseFactory, config_dir: Path) -> str:
    brain_secrets, _ = load_or_create(config_dir)

    async def migrate(url: str) -> object:
        return await db.migrator(brain_secrets).migrate(url)

    return await database_factory.template("z4j", migrate)


@pytest.fixture(scope="session")
def brain_config_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("z4j-config")


@pytest.fixture
async def brain_database(
    database_factory: DatabaseFactory, brain_config_dir: Path
) -> AsyncIterator[str]:
    template = await z4j_template(database_factory, brain_config_dir)
    url = database_factory.create(template, stem="z4j")
    yield url
    database_factory.drop(url)


@pytest.fixture
def brain_server(
    brain_database: str, brain_config_dir: Path, tmp_path: Path
) -> Iterator[BrainProcess]:
    server = BrainProcess(brain_database, brain_config_dir, free_port(), tmp_path / "brain.log")
    server.start()
    yield server
    server.stop()


async def wait_for(predicate: Any, within: float = 30.0, interval: float = 0.1) -> Any:
    """Poll an async predicate until it returns something truthy."""
    deadline = time.monotonic() + within
    while True:
        result = await predicate()
        if result or time.monotonic() > deadline:
            return result
        await asyncio.sleep(interval)
