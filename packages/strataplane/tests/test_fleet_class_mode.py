"""Telegraf class mode end to end against the real served app: every member runs with the
class token; config requests get the class config (one render per class and version at the
release pointer); each member proves what it applied by its own heartbeats; a new release
reaches every member; a member whose own artifact differs gets it at its own address, and an
address shared by members that differ is ambiguous; a revoked class token is refused."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any
from uuid import UUID

import pytest
from platformkit.db.scope import tenant_transaction
from strataplane.actions import fleet_enrollment, fleet_inventory
from strataplane.actions import fleet_errors as fe
from strataplane.actions.context import Ctx, Services
from strataplane.db import SCOPE
from strataplane.domain.fleet_status import http_date
from strataplane.simulate.http import HttpPool, Reply
from strataplane.simulate.seed import publish
from strataplane.simulate.telegraf import SimulatedTelegraf
from strataplane.store import fleet_agents, fleet_class
from strataplane.testing import Seed
from strataplane.testing.spec_files import TELEGRAF_ROUTE, fleet_settings, telegraf_layer

pytestmark = pytest.mark.long_module  # minutes: run first (platformkit.testing.plugin)

CONFIG = "/agents/telegraf/config"


def tree(percpu: str = "false") -> dict[str, str]:
    return {
        "layers/base.toml": telegraf_layer(percpu),
        "routes/influx.toml": TELEGRAF_ROUTE,
        "settings.toml": fleet_settings("telegraf"),
    }


@dataclass
class Class:
    services: Services
    ctx: Ctx
    tenant_id: UUID
    pool: HttpPool
    token: str
    token_id: UUID
    agent_url: str  # the server's, rendered into every configuration

    def telegraf(self, hostname: str, **options: Any) -> SimulatedTelegraf:
        env = {
            "TELEGRAF_CONTROLLER_TOKEN": self.token,
            "INFLUX_TOKEN": self.token,
            "STRATAPLANE_INSTANCE_ID": hostname,
            "HOSTNAME": hostname,
        }
        return SimulatedTelegraf(self.pool, CONFIG, env, watch_interval=0.3, **options)

    async def fetch(self, method: str, address: str) -> Reply:
        """A config request of Telegraf 1.39.1 from ``address`` (through X-Forwarded-For)."""
        headers = {
            "Authorization": f"Bearer {self.token}",
            "User-Agent": "Telegraf/1.39.1 Go/1.24",
            "X-Forwarded-For": address,
        }
        reply = await self.pool.request(method, CONFIG, headers)
        assert reply.status == 200, reply.body
        return reply

    async def config(self, address: str) -> bytes:
        return bytes((await self.fetch("GET", address)).body)

    async def rows(self, sql: str, *args: Any) -> list[dict[str, Any]]:
        async with tenant_transaction(self.services.pool, SCOPE, self.tenant_id) as conn:
            cur = await conn.execute(sql, args)
            return list(await cur.fetchall())  # type: ignore[arg-type]

    async def reconciled(self) -> None:
        """Until the server's first reconcile of the tenant ran: it renders every agent again
        with the server's agent URL and records that URL (``fleet_render_url``)."""
        deadline = asyncio.get_running_loop().time() + 120
        sql = "SELECT 1 FROM fleet_render_url WHERE agent_url = %s"
        while not await self.rows(sql, self.agent_url):
            assert asyncio.get_running_loop().time() < deadline
            await asyncio.sleep(0.1)

    async def member(
        self, hostname: str, check: Callable[[fleet_agents.Agent], bool], what: object = None
    ) -> fleet_agents.Agent:
        deadline = asyncio.get_running_loop().time() + 120
        while True:
            async with tenant_transaction(self.services.pool, SCOPE, self.tenant_id) as conn:
                found = await fleet_agents.find_agent(conn, self.tenant_id, "telegraf", hostname)
            if found is not None and check(found):
                return found
            assert asyncio.get_running_loop().time() < deadline, (found, what)
            await asyncio.sleep(0.1)


@pytest.fixture(scope="module")
def served_settings() -> dict[str, str]:
    # the tests speak for hosts behind other addresses through X-Forwarded-For
    return {"fleet_proxy_from": '["127.0.0.1/32"]'}


@pytest.fixture
async def klass(served: str, served_services: Services, served_seed: Seed) -> AsyncIterator[Class]:
    seed = served_seed
    tenant, admin = await seed.tenant()
    ctx = seed.ctx(admin, tenant.id)
    created = await fleet_enrollment.create_enrollment_token(
        ctx, "edge", labels={"env": "edge"}, mode="class"
    )
    pool = HttpPool(served, size=10)
    yield Class(served_services, ctx, tenant.id, pool, created.plaintext, created.token.id, served)
    await pool.close()


async def test_members_run_the_class_config_and_prove_it_each(klass: Class) -> None:
    first = await publish(klass.services.pool, klass.tenant_id, tree())
    reply = await klass.pool.request(
        "POST",
        "/api/v1/enroll/telegraf",
        {"Authorization": f"Bearer {klass.token}", "Content-Type": "application/json"},
        json.dumps({"instance_id": "edge-a", "hostname": "edge-a.example.com"}).encode(),
    )
    assert reply.status == 201, reply.body
    enrolled = json.loads(reply.body)
    # a class issues no credential of its own: its members run with the class token
    assert enrolled["credential"] == klass.token
    assert enrolled["environment"]["STRATAPLANE_INSTANCE_ID"] == "edge-a.example.com"
    # edge-b never called enroll: its first heartbeat makes it a member
    sims = [klass.telegraf("edge-a.example.com"), klass.telegraf("edge-b.example.com")]
    tasks = [asyncio.create_task(sim.run()) for sim in sims]
    try:
        members = [
            await klass.member(h, lambda a: a.sync == "in_sync" and a.applied_revision_id == first)
            for h in ("edge-a.example.com", "edge-b.example.com")
        ]
        defaults = await klass.rows(
            "SELECT agent_version, desired_revision_id, desired_artifact FROM class_default"
        )
        assert [(d["agent_version"], d["desired_revision_id"]) for d in defaults] == [
            ("1.39.1", first)
        ]
        class_artifact = bytes(defaults[0]["desired_artifact"])
        for sim, member in zip(sims, members, strict=True):
            assert member.enrollment_token_id == klass.token_id
            assert member.applied_artifact == class_artifact
            assert member.applied_revision_id == first
            assert member.health == "healthy"
            assert sim.config_hash == class_artifact.hex()
        served = await klass.rows("SELECT address::text, artifact FROM class_served")
        assert [bytes(s["artifact"]) for s in served] == [class_artifact]

        second = await publish(klass.services.pool, klass.tenant_id, tree(percpu="true"))
        for hostname in ("edge-a.example.com", "edge-b.example.com"):
            member = await klass.member(
                hostname,
                lambda a: a.applied_revision_id == second and a.sync == "in_sync",
                [(s.state, s.exit_reason, s.reloads, s.baselines[-3:]) for s in sims],
            )
            assert member.applied_artifact != class_artifact
        assert all(sim.reloads >= 1 and sim.state == "running" for sim in sims)
        defaults = await klass.rows("SELECT desired_revision_id FROM class_default")
        assert [d["desired_revision_id"] for d in defaults] == [second]
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    await fleet_enrollment.revoke_enrollment_token(klass.ctx, klass.token_id)
    headers = {"Authorization": f"Bearer {klass.token}", "User-Agent": "Telegraf/1.39.1 Go/1.24"}
    deadline = asyncio.get_running_loop().time() + 120
    while (await klass.pool.request("GET", CONFIG, headers)).status != 401:
        assert asyncio.get_running_loop().time() < deadline
        await asyncio.sleep(0.1)


async def test_each_version_gets_its_own_class_config(klass: Class) -> None:
    await publish(klass.services.pool, klass.tenant_id, tree())
    replies = {}
    for version in ("1.38.2", "1.39.1", "1.36.0"):
        headers = {
            "Authorization": f"Token {klass.token}",
            "User-Agent": f"Telegraf/{version} Go/1.24",
        }
        replies[version] = await klass.pool.request("GET", CONFIG, headers)
    assert replies["1.38.2"].status == replies["1.39.1"].status == 200
    assert replies["1.36.0"].status == 403  # no outputs.heartbeat before 1.37
    # before 1.39 Telegraf sends INFLUX_TOKEN, and its heartbeat must use the same variable
    assert b"${INFLUX_TOKEN}" in replies["1.38.2"].body
    assert b"${TELEGRAF_CONTROLLER_TOKEN}" in replies["1.39.1"].body
    versions = await klass.rows("SELECT agent_version FROM class_default ORDER BY 1")
    assert [v["agent_version"] for v in versions] == ["1.38.2", "1.39.1"]


async def test_class_tokens_are_telegraf_only_and_need_no_approval(klass: Class) -> None:
    with pytest.raises(fe.UnsupportedMode):
        await fleet_enrollment.create_enrollment_token(
            klass.ctx, "v", agent_kind="vector", mode="class"
        )
    with pytest.raises(fe.UnsupportedMode):
        await fleet_enrollment.create_enrollment_token(
            klass.ctx, "t", mode="class", requires_approval=True
        )


SPECIAL = """agentKind = "telegraf"
owner = "platform"

[selector.matchLabels]
tier = "special"

[config.inputs.mem.default]
"""


async def test_an_address_resolves_to_its_member_unless_members_there_differ(
    klass: Class,
) -> None:
    await publish(klass.services.pool, klass.tenant_id, {**tree(), "layers/special.toml": SPECIAL})

    async def beat(hostname: str, address: str) -> None:
        body = {"id": hostname, "version": "Telegraf 1.39.1", "hostname": hostname}
        headers = {
            "Authorization": f"Bearer {klass.token}",
            "Content-Type": "application/json",
            "X-Forwarded-For": address,
        }
        reply = await klass.pool.request(
            "POST", "/agents/telegraf/heartbeat", headers, json.dumps(body).encode()
        )
        assert reply.status == 200, reply.body

    def rendered(m: fleet_agents.Agent) -> bool:  # for the version its heartbeat named
        return m.version == "1.39.1" and m.desired_artifact is not None

    await beat("a.example.com", "10.9.0.1")
    await beat("b.example.com", "10.9.0.2")
    a = await klass.member("a.example.com", rendered)
    b = await klass.member("b.example.com", rendered)
    default = await klass.config("10.9.0.2")
    [row] = await klass.rows("SELECT desired_artifact FROM class_default")
    class_hash = bytes(row["desired_artifact"]).hex()
    assert class_hash.encode() in default
    assert b.desired_artifact is not None
    assert b.desired_artifact.hex() == class_hash  # same Layers: the class's own render

    # rendered with the server's agent URL, as the API does: rendering the member again (the
    # tenant's first reconcile does) gives the same bytes, so its artifact does not move
    await fleet_inventory.set_manual_labels(
        klass.ctx, a.host_id, {"tier": "special"}, agent_url=klass.agent_url
    )
    a = await klass.member("a.example.com", lambda m: m.desired_artifact != b.desired_artifact)
    assert a.desired_artifact is not None
    own = await klass.config("10.9.0.1")
    assert a.desired_artifact.hex().encode() in own  # the member's own configuration
    assert f"{klass.agent_url}/agents/telegraf/heartbeat".encode() in own
    assert b"inputs.mem" in own
    assert class_hash.encode() in await klass.config("10.9.0.2")
    await klass.reconciled()
    again = await klass.member("a.example.com", lambda m: True)
    assert (again.desired_artifact, again.desired_since) == (a.desired_artifact, a.desired_since)

    await beat("b.example.com", "10.9.0.1")  # b moves behind a's address
    await klass.member("b.example.com", lambda m: str(m.last_source_ip) == "10.9.0.1")
    assert class_hash.encode() in await klass.config("10.9.0.1")
    for hostname in ("a.example.com", "b.example.com"):
        member = await klass.member(hostname, lambda m: m.sync_reason == "ambiguous_address")
        assert member.sync == "out_of_sync"
        # the change shows in the agent's history as any transition does
        events = await klass.rows(
            "SELECT from_value, to_value FROM agent_status_event WHERE agent_instance_id = %s "
            "AND field = 'sync' ORDER BY id",
            member.id,
        )
        assert events[-1]["to_value"] == "out_of_sync"
        assert events[-1]["from_value"] != "out_of_sync"


async def test_addresses_without_a_get_for_30_days_are_forgotten(klass: Class) -> None:
    await publish(klass.services.pool, klass.tenant_id, tree())

    for address in ("10.8.0.1", "10.8.0.2"):
        await klass.config(address)

    async def age(address: str, days: int) -> None:
        async with tenant_transaction(klass.services.pool, SCOPE, klass.tenant_id) as conn:
            await conn.execute(
                "UPDATE class_served SET served_at = now() - make_interval(days => %s) "
                "WHERE address = %s",
                (days, address),
            )

    await age("10.8.0.1", 31)
    await age("10.8.0.2", 31)
    await klass.config("10.8.0.2")  # it still polls: the row says so, at most once a day
    # the server's fleet loop prunes each tenant about once an hour, this one perhaps already
    async with tenant_transaction(klass.services.pool, SCOPE, klass.tenant_id) as conn:
        assert await fleet_class.prune_served(conn, klass.tenant_id) in (0, 1)
    rows = await klass.rows(
        "SELECT host(address) AS a, served_at > now() - interval '1 day' AS fresh FROM class_served"
    )
    assert rows == [{"a": "10.8.0.2", "fresh": True}]
    # a forgotten address that comes back counts as different: its watcher reloads once
    async with tenant_transaction(klass.services.pool, SCOPE, klass.tenant_id) as conn:
        cur = await conn.execute(
            "UPDATE class_default SET desired_since = now() - interval '1 hour' "
            "RETURNING desired_since"
        )
        [row] = await cur.fetchall()
    settled = http_date(row["desired_since"])

    assert (await klass.fetch("HEAD", "10.8.0.2")).headers["last-modified"] == settled
    assert (await klass.fetch("HEAD", "10.8.0.1")).headers["last-modified"] != settled
