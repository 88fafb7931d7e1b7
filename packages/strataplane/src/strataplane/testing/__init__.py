"""pytest fixtures for strataplane, registered as a plugin (entry point ``pytest11``).

- ``strataplane_template``: the migrated template database, once per session;
- ``strataplane_database``: a fresh clone of it per test (administrative URL);
- ``sp_services``: actions' services over the application's own login (RLS applies), with
  argon2id at test cost;
- ``sp_app``: the real ASGI app with its lifespan (job runner included);
- ``sp_seed``: creates admins, tenants, users and tokens through the actions.

``served_strataplane`` runs the real server (granian) in its own process for the end-to-end
tests whose agents reach it over HTTP; ``strataplane.testing.served`` has the fixtures that
serve one per test module and the helpers those tests share, ``strataplane.testing.spec_files``
the spec files they publish.

Heavy imports happen inside the fixtures, so loading the plugin costs the other packages'
test runs nothing.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any
from uuid import UUID

import pytest

if TYPE_CHECKING:
    import httpx
    from fastapi import FastAPI
    from platformkit.testing.databases import DatabaseFactory

    from strataplane.actions.context import Ctx, Principal, Services
    from strataplane.store.tenants import Tenant
    from strataplane.store.users import User

pytest_plugins = ["strataplane.testing.served"]

PASSWORD = "correct horse battery staple"  # noqa: S105 - the test users' password
BASE_URL = "http://testserver"
IMPLEMENTED_TABLES = (
    "tenant",
    "tenant_counter",
    "installation",
    "controller_shard",
    "app_user",
    "tenant_member",
    "team",
    "team_member",
    "service_account",
    "role_binding",
    "api_token",
    "web_session",
    "spec_blob",
    "spec_revision",
    "spec_object",
    "change_set",
    "change_set_file",
    "change_set_review",
    "operation",
    "idempotency_key",
    "audit_event",
    "platform_audit_event",
    # the fleet (migrations 0010-0012)
    "host",
    "host_label",
    "network_zone",
    "enrollment_token",
    "trust_anchor",
    "artifact",
    "agent_instance",
    "class_default",
    "class_served",
    "agent_credential",
    "agent_status_event",
    "agent_log_entry",
    "rollout",
    "release",
    "change_set_impact",
    # safe delivery (migration 0030)
    "catalog_bundle",
    "plugin_schema",
    "artifact_validation",
    "rollout_stage",
    "rollout_assignment",
    "pin",
    # secrets (migration 0060)
    "secret_key",
    "tenant_key",
    "sealed_value",
    "secret_version",
    "secret_delivery",
    "audit_sink",  # migration 0061
    # Elastic Agent (migration 0070)
    "agent_component",
    "agent_action",
)
# Tables the spec does not have, each added by a decision record (docs/decisions/).
# decisions 0022, 0025, 0033, 0046
ADDED_TABLES = ("tenant_invitation", "sign_in_throttle", "fleet_render_url", "oidc_login")


async def _migrate(url: str) -> object:
    from platformkit.db.pool import open_pool

    from strataplane import db
    from strataplane.actions.catalog import ensure_shipped
    from strataplane.settings import Settings

    done = await db.migrator().migrate(url)
    # The shipped catalog bundles, once in the template rather than in every test database.
    pool = await open_pool(db.app_url(url), min_size=1, max_size=1)
    try:
        await ensure_shipped(pool, Settings())
    finally:
        await pool.close()
    return done


@pytest.fixture(scope="session")
def strataplane_keyring(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """One deployment keyring for the session, named in the environment so that the tests'
    services and the servers they start (which inherit it) open the same file."""
    import os

    path = str(tmp_path_factory.mktemp("keyring") / "keyring.json")
    saved = os.environ.get("STRATAPLANE_KEYRING_PATH")
    os.environ["STRATAPLANE_KEYRING_PATH"] = path
    yield path
    if saved is None:
        os.environ.pop("STRATAPLANE_KEYRING_PATH", None)
    else:
        os.environ["STRATAPLANE_KEYRING_PATH"] = saved


@pytest.fixture(scope="session")
async def strataplane_template(database_factory: DatabaseFactory, strataplane_keyring: str) -> str:
    return await database_factory.template("strataplane", _migrate)


@pytest.fixture
def strataplane_database(
    database_factory: DatabaseFactory, strataplane_template: str
) -> Iterator[str]:
    url = database_factory.create(strataplane_template, stem="sp")
    yield url
    database_factory.drop(url)


@pytest.fixture
async def sp_services(strataplane_database: str) -> AsyncIterator[Services]:
    from platformkit.db.pool import open_pool
    from platformkit.db.scope import transaction
    from platformkit.passwords import FAST_TEST_POLICY
    from pydantic import SecretStr

    from strataplane import db
    from strataplane.actions.context import Services
    from strataplane.settings import Settings
    from strataplane.store import tenants

    pool = await open_pool(db.app_url(strataplane_database), min_size=1, max_size=4)
    async with transaction(pool) as conn:
        await tenants.ensure_installation(conn, 4)
    settings = Settings(database_url=SecretStr(strataplane_database))
    yield Services(pool, settings, password_policy=FAST_TEST_POLICY)
    await pool.close()


@pytest.fixture
async def sp_app(strataplane_database: str) -> AsyncIterator[FastAPI]:
    from asgi_lifespan import LifespanManager
    from platformkit.passwords import FAST_TEST_POLICY
    from pydantic import SecretStr

    from strataplane.app import create_app
    from strataplane.settings import Settings

    settings = Settings(database_url=SecretStr(strataplane_database), pool_size=8, shards=4)
    app = create_app(settings, password_policy=FAST_TEST_POLICY)
    async with LifespanManager(app):
        yield app


class Seed:
    """Creates what tests need through the same actions the API calls."""

    def __init__(self, services: Services, *, names_from: int = 0) -> None:
        """``names_from``: where the numbers of generated names start, so two seeds on one
        database do not collide."""
        self.services = services
        self._n = names_from

    def system(self) -> Ctx:
        from strataplane.actions.context import system_ctx

        return system_ctx(self.services)

    def principal(self, user: User, tenant_id: UUID | None, **extra: Any) -> Principal:
        from strataplane.actions.context import Principal

        return Principal(
            user.id, user.kind, user.display_name, user.platform_admin, tenant_id, **extra
        )

    def ctx(self, user: User, tenant_id: UUID | None, **extra: Any) -> Ctx:
        from strataplane.actions.context import user_ctx

        return user_ctx(self.services, self.principal(user, tenant_id, **extra))

    async def user(self, username: str | None = None, *, platform_admin: bool = False) -> User:
        from strataplane.actions import users

        self._n += 1
        name = username or f"user{self._n}"
        return await users.create_user(
            self.system(), name, name.title(), PASSWORD, platform_admin=platform_admin
        )

    async def tenant(self, slug: str | None = None) -> tuple[Tenant, User]:
        """A tenant with a fresh user holding admin over it."""
        from strataplane.actions import tenants

        admin = await self.user()
        self._n += 1
        tenant = await tenants.create_tenant(
            self.system(), slug or f"tenant-{self._n}", "Tenant", admin_user_id=admin.id
        )
        return tenant, admin

    async def member(self, admin_ctx: Ctx, role: str | None = None, **scope: Any) -> User:
        """A new local user added to the admin's tenant, bound to ``role`` if given."""
        from strataplane.actions import bindings, members
        from strataplane.store.users import User

        self._n += 1
        name = f"member{self._n}"
        added = await members.add_member(admin_ctx, username=name, password=PASSWORD)
        if role is not None:
            await bindings.create_role_binding(admin_ctx, role=role, user_id=added.user_id, **scope)
        return User(
            added.user_id,
            added.kind,
            added.issuer,
            added.subject,
            added.email,
            added.display_name,
            False,
            added.created_at,
            None,
            None,
        )


@pytest.fixture
def sp_seed(sp_services: Services) -> Seed:
    return Seed(sp_services)


@pytest.fixture
def sp_app_seed(sp_app: FastAPI) -> Seed:
    services: Services = sp_app.state.services
    return Seed(services)


def client_for(app: FastAPI, token: str | None = None) -> httpx.AsyncClient:
    """An httpx client on the app, with a bearer token if given (use ``async with``)."""
    import httpx

    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url=BASE_URL, headers=headers
    )


_SERVER_LOGS: dict[str, Path] = {}


async def assert_same_artifact(
    services: Services,
    tenant_id: UUID,
    found: bytes | None,
    wanted: bytes | None,
    found_content: str | None = None,
) -> None:
    """``found == wanted`` (artifact hashes); if not, the failure shows how the two
    configurations differ, as stored in the tenant's artifacts (``found_content`` for one
    rendered but not stored)."""
    if found == wanted:
        return
    import difflib

    from platformkit.db.scope import tenant_transaction

    from strataplane.db import SCOPE
    from strataplane.store.fleet_artifacts import get_artifacts

    digests = [d for d in (wanted, found) if d is not None]
    async with tenant_transaction(services.pool, SCOPE, tenant_id) as conn:
        stored = await get_artifacts(conn, tenant_id, digests)

    def lines(digest: bytes | None) -> list[str]:
        known = stored.get(digest) if digest is not None else None
        return known.content.decode(errors="replace").splitlines() if known else [repr(digest)]

    theirs = found_content.splitlines() if found_content is not None else lines(found)
    diff = "\n".join(difflib.unified_diff(lines(wanted), theirs, "wanted", "found", lineterm=""))
    pytest.fail(f"the artifacts differ:\n{diff}")


def server_log(url: str, lines: int = 60) -> str:
    """The last ``lines`` lines the server ``served_strataplane`` started at ``url`` logged."""
    path = _SERVER_LOGS.get(url)
    if path is None or not path.exists():
        return "(no server log)"
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:]) or "(empty)"


@contextlib.contextmanager
def served_strataplane(database_url: str, **settings: str) -> Iterator[str]:
    """The server on a free port over ``database_url`` with fast fleet loops (and ``settings``,
    named as STRATAPLANE_ variables without the prefix); yields its base URL. The variables are
    set while it runs, as the server process reads them, and put back afterwards. Its log goes
    to a file whose last lines ``server_log(url)`` gives, for a failing test's message."""
    import tempfile

    from platformkit.http import Server, start_server
    from platformkit.testing.services import free_port

    port = free_port()
    log = Path(tempfile.mkdtemp(prefix="strataplane-served-")) / "server.log"
    _SERVER_LOGS[f"http://127.0.0.1:{port}"] = log
    env = {
        "STRATAPLANE_DATABASE_URL": database_url,
        "STRATAPLANE_SHARDS": "2",
        "STRATAPLANE_FLEET_AGENT_URL": f"http://127.0.0.1:{port}",
        "STRATAPLANE_FLEET_CONTROLLER_INTERVAL": "0.3",
        "STRATAPLANE_FLEET_FLUSH_INTERVAL": "0.1",
        **{f"STRATAPLANE_{name.upper()}": value for name, value in settings.items()},
    }
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    server: Server | None = None
    try:
        server = start_server(
            "strataplane.app:create_app",
            port=port,
            factory=True,
            log_level="warning",
            log_file=log,
        )
        server.wait_ready(60)
        yield f"http://127.0.0.1:{port}"
    finally:
        if server is not None:
            server.stop()
        _SERVER_LOGS.pop(f"http://127.0.0.1:{port}", None)
        shutil.rmtree(log.parent, ignore_errors=True)
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
