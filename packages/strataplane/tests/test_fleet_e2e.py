"""The fleet loop end to end against the real served app (granian in its own process):
enroll -> render -> fetch -> heartbeat -> in_sync with simulated Telegraf instances; a new
revision reaches a watching agent; a broken render never reaches it; Last-Modified and the
watcher's first-tick baseline; silence becomes not_reporting."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any
from uuid import UUID

import pytest
from strataplane.actions import fleet_enrollment, tokens
from strataplane.actions.context import Services
from strataplane.domain.fleet_status import http_date
from strataplane.simulate.http import HttpPool
from strataplane.simulate.seed import publish
from strataplane.simulate.telegraf import SimulatedTelegraf
from strataplane.store import fleet_agents
from strataplane.testing import Seed
from strataplane.testing.served import enroll, get_agent
from strataplane.testing.spec_files import TELEGRAF_ROUTE, fleet_settings, telegraf_layer


def tree(percpu: str = "false", **extra: str) -> dict[str, str]:
    return {
        "layers/base.toml": telegraf_layer(percpu),
        "routes/influx.toml": TELEGRAF_ROUTE,
        "settings.toml": fleet_settings("telegraf"),
        **extra,
    }


@dataclass
class Fleet:
    services: Services
    tenant_id: UUID
    base_url: str
    pool: HttpPool
    admin_token: str
    enroll_token: str

    async def enroll(self, name: str) -> dict[str, Any]:
        return await enroll(self.pool, self.enroll_token, name)

    def telegraf(self, enrolled: dict[str, Any], **options: Any) -> SimulatedTelegraf:
        return SimulatedTelegraf(
            self.pool,
            "/agents/telegraf/config",
            dict(enrolled["environment"]),
            watch_interval=options.pop("watch_interval", 0.3),
            retry_delay=0.1,
            **options,
        )

    async def agent(self, agent_id: str) -> fleet_agents.Agent:
        return await get_agent(self.services, self.tenant_id, agent_id)

    async def until(
        self, agent_id: str, check: Callable[[fleet_agents.Agent], bool], within: float = 120
    ) -> fleet_agents.Agent:
        deadline = asyncio.get_running_loop().time() + within
        while True:
            agent = await self.agent(agent_id)
            if check(agent):
                return agent
            assert asyncio.get_running_loop().time() < deadline, agent
            await asyncio.sleep(0.1)


@pytest.fixture
async def fleet(served: str, served_seed: Seed) -> AsyncIterator[Fleet]:
    seed, served_services = served_seed, served_seed.services
    tenant, admin = await seed.tenant()
    ctx = seed.ctx(admin, tenant.id)
    token = await tokens.create_token(ctx, "ops")
    created = await fleet_enrollment.create_enrollment_token(ctx, "prod", labels={"env": "prod"})
    pool = HttpPool(served, size=20)
    yield Fleet(served_services, tenant.id, served, pool, token.plaintext, created.plaintext)
    await pool.close()


async def test_enroll_fetch_heartbeat_in_sync_then_reload(fleet: Fleet) -> None:
    first = await publish(fleet.services.pool, fleet.tenant_id, tree())
    enrolled = await fleet.enroll("web-1")
    assert enrolled["credential"].startswith("spt_")
    sim = fleet.telegraf(enrolled)
    task = asyncio.create_task(sim.run())
    try:
        agent = await fleet.until(enrolled["agent_id"], lambda a: a.sync == "in_sync")
        assert agent.health == "healthy"
        assert agent.version == "1.39.1"
        assert agent.desired_revision_id == first == agent.applied_revision_id
        assert agent.applied_artifact == agent.desired_artifact == agent.served_artifact
        assert sim.config_hash == agent.desired_artifact.hex()  # type: ignore[union-attr]
        second = await publish(fleet.services.pool, fleet.tenant_id, tree(percpu="true"))
        agent = await fleet.until(
            enrolled["agent_id"],
            lambda a: a.applied_revision_id == second and a.sync == "in_sync",
        )
        assert sim.reloads >= 1
        assert sim.state == "running"
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_an_agent_started_before_its_config_exists_comes_back_with_its_service_manager(
    fleet: Fleet,
) -> None:
    """Nothing is published yet: the start-up GETs get 503 and the process exits, as Telegraf
    does; restarted by its service manager, it runs the config once there is one."""
    enrolled = await fleet.enroll("early-1")
    sim = fleet.telegraf(enrolled, restart_after=0.2)
    task = asyncio.create_task(sim.run())
    try:
        deadline = asyncio.get_running_loop().time() + 120
        while sim.restarts < 1:
            assert asyncio.get_running_loop().time() < deadline, sim
            await asyncio.sleep(0.1)
        assert sim.exit_reason == "config fetch or parse failed"
        first = await publish(fleet.services.pool, fleet.tenant_id, tree())
        agent = await fleet.until(enrolled["agent_id"], lambda a: a.sync == "in_sync")
        assert agent.applied_revision_id == first
        assert sim.state == "running"
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_broken_render_never_reaches_the_agent(fleet: Fleet) -> None:
    await publish(fleet.services.pool, fleet.tenant_id, tree())
    enrolled = await fleet.enroll("web-2")
    sim = fleet.telegraf(enrolled)
    task = asyncio.create_task(sim.run())
    try:
        good = await fleet.until(enrolled["agent_id"], lambda a: a.sync == "in_sync")
        reloads = sim.reloads
        # a higher Layer makes inputs.cpu a non-table: the composition fails (SP-5002)
        broken = (
            'agentKind = "telegraf"\nowner = "platform"\nprecedence = 10\n\n'
            "[config.inputs]\ncpu = 1\n"
        )
        await publish(fleet.services.pool, fleet.tenant_id, tree(**{"layers/zz.toml": broken}))
        agent = await fleet.until(enrolled["agent_id"], lambda a: a.sync == "render_error")
        assert agent.desired_artifact == good.desired_artifact
        assert agent.desired_since == good.desired_since
        await asyncio.sleep(1.0)
        assert sim.reloads == reloads
        assert sim.state == "running"
        assert sim.config_hash == good.desired_artifact.hex()  # type: ignore[union-attr]
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_first_tick_baseline_and_last_modified(fleet: Fleet) -> None:
    """The desired artifact changes after the start-up GET, before or after the watcher's first
    tick (whose Last-Modified becomes Telegraf's baseline): either way a later tick differs and
    the agent reloads once. The dates the server answers while an agent is stale are checked
    on their own below, without the race between the change and the first tick."""
    await publish(fleet.services.pool, fleet.tenant_id, tree())
    enrolled = await fleet.enroll("web-3")
    headers = {
        "Authorization": f"Bearer {enrolled['credential']}",
        "User-Agent": "Telegraf/1.39.1 Go/1.24.4",
    }
    get = await fleet.pool.request("GET", "/agents/telegraf/config", headers)
    head = await fleet.pool.request("HEAD", "/agents/telegraf/config", headers)
    assert get.status == head.status == 200
    assert get.headers["last-modified"] == head.headers["last-modified"]
    assert get.headers["last-modified"].endswith(" GMT")
    sim = fleet.telegraf(enrolled, watch_interval=1.2)
    task = asyncio.create_task(sim.run())
    try:
        await fleet.until(enrolled["agent_id"], lambda a: a.served_at is not None)
        second = await publish(fleet.services.pool, fleet.tenant_id, tree(percpu="true"))
        agent = await fleet.until(
            enrolled["agent_id"], lambda a: a.applied_revision_id == second, within=120
        )
        assert sim.reloads == 1
        assert agent.desired_since is not None
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_a_stale_agent_sees_every_head_tick_differ(fleet: Fleet) -> None:
    """While an agent runs an older artifact than its desired one, HEAD answers the current
    second, so a watcher whose first tick already saw the new date still sees a later tick
    differ; once it fetched the new artifact, HEAD answers desired_since again."""
    await publish(fleet.services.pool, fleet.tenant_id, tree(percpu="false"))
    enrolled = await fleet.enroll("web-4")
    headers = {
        "Authorization": f"Bearer {enrolled['credential']}",
        "User-Agent": "Telegraf/1.39.1 Go/1.24.4",
    }
    old = await fleet.pool.request("GET", "/agents/telegraf/config", headers)
    await fleet.until(enrolled["agent_id"], lambda a: a.served_at is not None)
    second = await publish(fleet.services.pool, fleet.tenant_id, tree(percpu="true"))
    agent = await fleet.until(enrolled["agent_id"], lambda a: a.desired_revision_id == second)
    assert agent.desired_since is not None
    ticks = []
    for _ in range(3):
        head = await fleet.pool.request("HEAD", "/agents/telegraf/config", headers)
        ticks.append(head.headers["last-modified"])
        await asyncio.sleep(1.2)
    assert len(set(ticks)) == 3
    assert old.status == 200
    new = await fleet.pool.request("GET", "/agents/telegraf/config", headers)
    assert new.headers["last-modified"] == http_date(agent.desired_since)
    head = await fleet.pool.request("HEAD", "/agents/telegraf/config", headers)
    assert head.headers["last-modified"] == http_date(agent.desired_since)


async def test_bad_or_revoked_credentials_get_401(fleet: Fleet) -> None:
    await publish(fleet.services.pool, fleet.tenant_id, tree())
    enrolled = await fleet.enroll("web-4")
    for header in (
        "",
        "Bearer spt_" + "a" * 52,
        "Basic Zm9vOmJhcg==",
        f"Token {enrolled['credential']}x",
    ):
        reply = await fleet.pool.request(
            "GET", "/agents/telegraf/config", {"Authorization": header}
        )
        assert reply.status == 401, header
    token_auth = await fleet.pool.request(
        "GET", "/agents/telegraf/config", {"Authorization": f"Token {enrolled['credential']}"}
    )
    assert token_auth.status == 200
    again = await fleet.enroll("web-4")  # enrolling again revokes the previous credential
    # The server's credential cache hears of the revocation through NOTIFY, moments after the
    # commit: the old credential is refused once the notice is in (allowed 5 s), then for good.
    stale = {"Authorization": f"Bearer {enrolled['credential']}"}
    deadline = asyncio.get_running_loop().time() + 5
    while (await fleet.pool.request("GET", "/agents/telegraf/config", stale)).status != 401:
        assert asyncio.get_running_loop().time() < deadline, "the old credential still works"
        await asyncio.sleep(0.05)
    for method in ("GET", "HEAD"):
        old = await fleet.pool.request(method, "/agents/telegraf/config", stale)
        assert old.status == 401
    fresh = await fleet.pool.request(
        "GET", "/agents/telegraf/config", {"Authorization": f"Bearer {again['credential']}"}
    )
    assert fresh.status == 200


async def test_silent_agent_becomes_not_reporting(fleet: Fleet) -> None:
    await publish(fleet.services.pool, fleet.tenant_id, tree())
    enrolled = await fleet.enroll("web-5")
    sim = fleet.telegraf(enrolled)
    task = asyncio.create_task(sim.run())
    await fleet.until(enrolled["agent_id"], lambda a: a.health == "healthy")
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    agent = await fleet.until(enrolled["agent_id"], lambda a: a.health == "not_reporting")
    assert agent.health_message is not None
