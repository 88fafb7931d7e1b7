"""Fixtures and helpers for the end-to-end tests that run the real server in its own process
(``served_strataplane``), one server per test module, with simulated agents reaching it over
HTTP.

- ``served_database``: the module's clone of the migrated template;
- ``served_settings``: the server's extra settings (STRATAPLANE_ variables without the
  prefix), none by default; a module that needs some overrides this fixture;
- ``served``: the server over ``served_database``, as its base URL;
- ``served_services``: the tests' own services over the same database (the application's
  login, argon2id at test cost);
- ``served_seed``: a ``Seed`` on those services whose generated names run on across the
  module's tests, as they share the database.

The helpers enroll agents, look them up, and take spec changes through review to a merge.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterable, Iterator
from typing import TYPE_CHECKING, Any
from uuid import UUID

import pytest

from strataplane.testing import Seed, served_strataplane

if TYPE_CHECKING:
    from platformkit.testing.databases import DatabaseFactory

    from strataplane.actions.context import Ctx, Services
    from strataplane.simulate.http import HttpPool
    from strataplane.store.change_sets import ChangeSet
    from strataplane.store.fleet_agents import Agent
    from strataplane.store.tenants import Tenant
    from strataplane.store.users import User


@pytest.fixture(scope="module")
def served_database(database_factory: DatabaseFactory, strataplane_template: str) -> Iterator[str]:
    url = database_factory.create(strataplane_template, stem="sp_served")
    yield url
    database_factory.drop(url)


@pytest.fixture(scope="module")
def served_settings() -> dict[str, str]:
    return {}


@pytest.fixture(scope="module")
def served(served_database: str, served_settings: dict[str, str]) -> Iterator[str]:
    with served_strataplane(served_database, **served_settings) as url:
        yield url


@pytest.fixture(scope="module")
async def served_services(served_database: str) -> AsyncIterator[Services]:
    from platformkit.db.pool import open_pool
    from platformkit.passwords import FAST_TEST_POLICY
    from pydantic import SecretStr

    from strataplane import db
    from strataplane.actions.context import Services
    from strataplane.settings import Settings

    pool = await open_pool(db.app_url(served_database), min_size=1, max_size=4)
    settings = Settings(database_url=SecretStr(served_database))
    yield Services(pool, settings, password_policy=FAST_TEST_POLICY)
    await pool.close()


@pytest.fixture(scope="module")
def served_seed(served_services: Services) -> Seed:
    return Seed(served_services)


async def platform_tenant(seed: Seed, slug: str | None = None) -> tuple[Tenant, User, Ctx]:
    """A new tenant, its admin and the admin's context, with the team ``platform`` that owns
    the test spec files."""
    from strataplane.actions import teams

    tenant, admin = await seed.tenant(slug)
    admin_ctx = seed.ctx(admin, tenant.id)
    await teams.create_team(admin_ctx, "platform", "Platform")
    return tenant, admin, admin_ctx


async def reviewers(seed: Seed, admin_ctx: Ctx, tenant_id: UUID) -> tuple[Ctx, Ctx]:
    """The contexts of two new members of the tenant: one bound to the role ``author``, one
    to ``approver``."""
    author = seed.ctx(await seed.member(admin_ctx, "author"), tenant_id)
    approver = seed.ctx(await seed.member(admin_ctx, "approver"), tenant_id)
    return author, approver


async def validated_change_set(author: Ctx, files: dict[str, str]) -> ChangeSet:
    """A change set by ``author`` writing ``files`` (path: content), after its validation ran
    (whatever the outcome)."""
    from strataplane.actions import change_sets, spec, validation

    cs = await change_sets.create_change_set(author, "change")
    for path, content in files.items():
        edit = await spec.write_file(author, cs.id, path, content.encode(), seen=cs.digest)
        cs = edit.change_set
    op, _ = await validation.request_validation(author, cs.id)
    await validation.run_validation(
        author.services.pool, validation.params_for(op, author.principal)
    )
    return await change_sets.access_change_set(author, cs.id)


async def merge_files(author: Ctx, approver: Ctx, files: dict[str, str]) -> int:
    """``files`` written, validated, approved by ``approver`` and merged; the new revision's
    id."""
    from strataplane.actions import history, reviews

    cs = await validated_change_set(author, files)
    assert cs.validated, cs.validation
    cs = await reviews.submit_change_set(author, cs.id, seen=cs.digest)
    cs, _ = await reviews.review_change_set(approver, cs.id, "approve", seen=cs.digest)
    _, revision = await history.merge_change_set(author, cs.id, seen=cs.digest)
    return revision.id


async def enroll(pool: HttpPool, token: str, name: str, kind: str = "telegraf") -> dict[str, Any]:
    """The answer of the server to enrolling an agent of ``kind`` with the enrollment token
    ``token``, as instance ``name`` on host ``name.example.com``."""
    import json

    body = json.dumps({"instance_id": name, "hostname": f"{name}.example.com"}).encode()
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    reply = await pool.request("POST", f"/api/v1/enroll/{kind}", headers, body)
    assert reply.status == 201, reply.body
    enrolled: dict[str, Any] = json.loads(reply.body)
    return enrolled


async def get_agent(services: Services, tenant_id: UUID, agent_id: str) -> Agent:
    """The tenant's agent ``agent_id`` as stored now."""
    from platformkit.db.scope import tenant_transaction

    from strataplane.db import SCOPE
    from strataplane.store import fleet_agents

    async with tenant_transaction(services.pool, SCOPE, tenant_id) as conn:
        found = await fleet_agents.get_agent(conn, tenant_id, UUID(agent_id))
    assert found is not None
    return found


async def stop(tasks: Iterable[asyncio.Task[None]]) -> None:
    """The simulated agents' tasks cancelled and finished."""
    running = list(tasks)
    for task in running:
        task.cancel()
    await asyncio.gather(*running, return_exceptions=True)
