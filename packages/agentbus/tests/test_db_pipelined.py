"""``db.pipelined_transaction``: BEGIN, the tenant, the body and COMMIT in one pipeline. A body
commits as one transaction in the tenant's scope; an error in it, raised by the body or by the
server at any point up to COMMIT, leaves nothing behind and the connection usable; the
transaction's settings end with it."""

from __future__ import annotations

import contextlib
import uuid

import httpx
import psycopg
import pytest
from agentbus.db import SCOPE, pipelined_transaction
from agentbus.gateway.context import Gateway
from agentbus.gateway.testkit import World, enroll, make_world
from agentbus.ids import parse_id
from platformkit.db.scope import tenant_transaction

DESCRIBE = "UPDATE agents SET description = %s WHERE id = %s RETURNING id"


async def description(gateway: Gateway, world: World, agent_id: uuid.UUID) -> str | None:
    async with tenant_transaction(gateway.pool, SCOPE, world.tenant_id) as conn:
        cur = await conn.execute("SELECT description FROM agents WHERE id = %s", (agent_id,))
        row = await cur.fetchone()
    assert row is not None
    value: str | None = row["description"]
    return value


@pytest.fixture
async def alice(gateway: Gateway, gateway_client: httpx.AsyncClient) -> tuple[World, uuid.UUID]:
    world = await make_world(gateway, "acme")
    agent = await enroll(gateway_client, world, "alice")
    return world, parse_id("agt", agent.agent_id)


async def test_a_body_commits_in_the_tenants_scope(
    gateway: Gateway, alice: tuple[World, uuid.UUID]
) -> None:
    world, agent_id = alice
    other = await make_world(gateway, "globex")
    async with pipelined_transaction(gateway.pool, other.tenant_id) as conn:
        cur = await conn.execute(DESCRIBE, ("from another tenant", agent_id))
        assert await cur.fetchall() == []  # row security: acme's agent is not there
    async with pipelined_transaction(gateway.pool, world.tenant_id) as conn:
        await conn.execute(DESCRIBE, ("committed", agent_id))
        setting = await conn.execute("SELECT current_setting('plan_cache_mode') AS mode")
        assert (await setting.fetchone()) == {"mode": "force_generic_plan"}
    assert await description(gateway, world, agent_id) == "committed"


@pytest.mark.parametrize("failure", ["the body raises", "a statement fails unfetched"])
async def test_an_error_leaves_nothing_and_the_connection_usable(
    gateway: Gateway, alice: tuple[World, uuid.UUID], failure: str
) -> None:
    world, agent_id = alice

    async def fail() -> None:
        async with pipelined_transaction(gateway.pool, world.tenant_id) as conn:
            await conn.execute(DESCRIBE, ("rolled back", agent_id))
            if failure == "the body raises":
                raise RuntimeError("the body failed")
            await conn.execute("SELECT 1 / 0")  # its error arrives at the end of the block

    with pytest.raises((RuntimeError, psycopg.errors.DataError)):
        await fail()
    assert await description(gateway, world, agent_id) != "rolled back"
    async with contextlib.AsyncExitStack() as held:  # every pooled connection at once
        for _ in range(gateway.pool.get_stats()["pool_size"]):
            conn = await held.enter_async_context(gateway.pool.connection())
            assert conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
            cur = await conn.execute(
                "SELECT current_setting('plan_cache_mode') AS mode,"
                " current_setting('app.tenant_id', true) AS tenant"
            )
            assert (await cur.fetchone()) == {"mode": "auto", "tenant": ""}
