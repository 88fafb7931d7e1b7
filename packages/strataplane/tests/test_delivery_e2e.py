"""Staged delivery end to end: the served app (granian in its own process, its controllers
running), a simulated fleet of Telegraf instances, and change sets merged through review. A
configuration Telegraf's loader refuses never gets past validation (level sandbox, SP-5005). A
configuration that loads but fails at run time (an input gathering from a host the machines
cannot reach: errors in every heartbeat) halts the rollout at its canary stage's bake and never
reaches the later stage; abort brings the canary back to health; a good configuration
completes; a pinned agent never moves. A canary that is down when a change ships never proves
it: the stage halts on apply failures, and abort leaves the fleet on what it ran."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

import pytest
from strataplane import errors
from strataplane.actions import change_sets, fleet_enrollment, pins, rollouts
from strataplane.actions.context import Ctx, Services
from strataplane.simulate.http import HttpPool
from strataplane.simulate.seed import publish
from strataplane.simulate.telegraf import SimulatedTelegraf
from strataplane.store import fleet_agents
from strataplane.store.change_sets import ChangeSet
from strataplane.testing import Seed, assert_same_artifact, server_log
from strataplane.testing.served import (
    enroll,
    get_agent,
    merge_files,
    platform_tenant,
    reviewers,
    stop,
    validated_change_set,
)
from strataplane.testing.spec_files import TELEGRAF_ROUTE, fleet_settings, telegraf_layer

pytestmark = pytest.mark.long_module  # minutes: run first (platformkit.testing.plugin)

# Passes every schema, but inputs.http's Init refuses both token sources: Telegraf stops.
BROKEN = """
[config.inputs.http.portal]
urls = ["https://portal.example.com/health"]
token = "abc"
token_file = "/etc/telegraf/portal.token"
"""
# Loads, but no machine of the fleet reaches the portal: each gather logs an error.
UNREACHABLE = "portal.internal.example"
FAILING = f"""
[config.inputs.http.portal]
urls = ["https://{UNREACHABLE}/health"]
"""
POLICY = """owner = "platform"
agentKinds = ["telegraf"]

[[stages]]
name = "canary"
bakeTime = "4s"
selector = { matchLabels = { canary = "true" } }

[[stages]]
name = "everything"
bakeTime = "3s"

[guardrails]
maxApplyFailurePercent = 0
maxHealthRegressionPercent = 0
"""


def tree(percpu: str = "false", extra: str = "") -> dict[str, str]:
    return {
        "layers/base.toml": telegraf_layer(percpu) + extra,
        "routes/influx.toml": TELEGRAF_ROUTE,
        "settings.toml": fleet_settings("telegraf", default_policy="staged"),
        "policies/rollout/staged.toml": POLICY,
    }


@dataclass
class Delivery:
    seed: Seed
    tenant_id: UUID
    admin: Ctx
    author: Ctx
    approver: Ctx
    pool: HttpPool
    tokens: dict[str, str]
    url: str
    tasks: list[asyncio.Task[None]] = field(default_factory=list)

    @property
    def services(self) -> Services:
        return self.seed.services

    async def enroll(self, name: str, group: str) -> tuple[dict[str, Any], SimulatedTelegraf]:
        enrolled = await enroll(self.pool, self.tokens[group], name)
        return enrolled, self.start(enrolled)

    def start(self, enrolled: dict[str, Any]) -> SimulatedTelegraf:
        """A Telegraf process (again, as its service manager restarts it)."""
        sim = SimulatedTelegraf(
            self.pool,
            "/agents/telegraf/config",
            dict(enrolled["environment"]),
            watch_interval=0.3,
            retry_delay=0.1,
            unreachable=frozenset({UNREACHABLE}),
        )
        self.tasks.append(asyncio.create_task(sim.run()))
        return sim

    async def agent(self, agent_id: str) -> fleet_agents.Agent:
        return await get_agent(self.services, self.tenant_id, agent_id)

    async def same_artifact(self, found: bytes | None, wanted: bytes | None) -> None:
        await assert_same_artifact(self.services, self.tenant_id, found, wanted)

    async def until(
        self, check: Callable[[], Awaitable[bool]], what: str, within: float = 120
    ) -> None:
        deadline = asyncio.get_running_loop().time() + within
        while not await check():
            if asyncio.get_running_loop().time() >= deadline:
                pytest.fail(
                    f"{what}: not within {within} s; the server logged:\n{server_log(self.url)}"
                )
            await asyncio.sleep(0.2)

    async def validate(self, files: dict[str, str]) -> ChangeSet:
        return await validated_change_set(self.author, files)

    async def merge(self, files: dict[str, str]) -> int:
        return await merge_files(self.author, self.approver, files)


@pytest.fixture
async def delivery(served: str, served_seed: Seed) -> AsyncIterator[Delivery]:
    seed = served_seed
    tenant, _, admin_ctx = await platform_tenant(seed)
    author, approver = await reviewers(seed, admin_ctx, tenant.id)
    tokens = {}
    for group, labels in (("canary", {"canary": "true"}), ("fleet", {"env": "prod"})):
        made = await fleet_enrollment.create_enrollment_token(admin_ctx, group, labels=labels)
        tokens[group] = made.plaintext
    http = HttpPool(served, size=20)
    d = Delivery(seed, tenant.id, admin_ctx, author, approver, http, tokens, served)
    yield d
    await stop(d.tasks)
    await http.close()


async def test_a_bad_config_halts_at_the_canary_abort_restores_a_good_one_completes(
    delivery: Delivery,
) -> None:
    d = delivery
    first = await publish(d.services.pool, d.tenant_id, tree())
    fleet = [
        await d.enroll(name, group)
        for name, group in (("canary-1", "canary"), ("web-1", "fleet"), ("web-2", "fleet"))
    ]
    ids = [e["agent_id"] for e, _ in fleet]

    async def all_in_sync_at(revision: int, agents: list[str]) -> bool:
        found = [await d.agent(a) for a in agents]
        return all(a.sync == "in_sync" and a.applied_revision_id == revision for a in found)

    await d.until(lambda: all_in_sync_at(first, ids), "the fleet runs r1")
    good = {a: (await d.agent(a)).desired_artifact for a in ids}
    # what each agent runs from here on (a first start may have run an earlier render of r1,
    # made before the agent's version was known)
    since = {a: len(sim.ran) - 1 for a, (_, sim) in zip(ids, fleet, strict=True)}
    # an operator pins web-2 to the revision it runs, for a reason, before anything ships
    pinned = await pins.create_pin(
        d.admin, revision_id=first, reason="change freeze on web-2", agent_id=UUID(ids[2])
    )

    # what Telegraf's loader refuses stops at validation: no rollout, no agent receives it
    refused = await d.validate({"layers/base.toml": telegraf_layer("false") + BROKEN})
    assert refused.validation is not None
    assert not refused.validated
    codes = {x["code"] for x in refused.validation["diagnostics"] if x["severity"] == "error"}
    assert codes == {"SP-5005"}
    await change_sets.close_change_set(d.author, refused.id)

    bad = await d.merge({"layers/base.toml": telegraf_layer("false") + FAILING})
    [ro] = await rollouts.list_rollouts(d.admin, limit=1)
    assert (ro.to_revision_id, ro.policy_name) == (bad, "staged")

    async def state_is(state: str) -> bool:
        return (await rollouts.access_rollout(d.admin, ro.number)).rollout.state == state

    await d.until(lambda: state_is("halted"), "the rollout halts at the canary's bake")
    view = await rollouts.access_rollout(d.admin, ro.number)
    assert [s.state for s in view.stages] == ["breached", "pending"]
    assert view.rollout.halt_reason is not None
    assert "stage canary: maxHealthRegressionPercent: 1 of 1 agents" in view.rollout.halt_reason
    values = view.stages[0].guardrails
    assert values is not None
    assert (values["applyFailures"], values["healthRegressions"], values["degraded"]) == (0, 1, 1)
    canary = await d.agent(ids[0])
    assert (canary.sync, canary.health, canary.applied_revision_id) == ("in_sync", "degraded", bad)
    canary_sim = fleet[0][1]
    assert canary_sim.state == "running"  # it runs, and reports its errors
    for agent_id, (_, sim) in zip(ids[1:], fleet[1:], strict=True):  # later stage: never
        agent = await d.agent(agent_id)
        await d.same_artifact(agent.desired_artifact, good[agent_id])
        assert sim.state == "running"
        assert set(sim.ran[since[agent_id] :]) == {good[agent_id].hex()}  # type: ignore[union-attr]
    # one rollout per agent kind: the next merge waits for this one
    with pytest.raises(errors.RolloutActive):
        await d.merge({"layers/base.toml": telegraf_layer("true")})

    await rollouts.abort_rollout(d.admin, ro.number)
    await d.until(
        lambda: _desired(d, ids[0], good[ids[0]]),
        "the canary's desired artifact is r1's again",
    )
    await d.until(lambda: all_in_sync_at(first, ids), "every agent runs r1 again")

    async def canary_healthy() -> bool:
        return (await d.agent(ids[0])).health == "healthy"

    await d.until(canary_healthy, "the canary's heartbeats carry no errors again")
    assert canary_sim.config_hash == good[ids[0]].hex()  # type: ignore[union-attr]
    assert (await rollouts.access_rollout(d.admin, ro.number)).rollout.halt_reason

    fixed = await d.merge({"layers/base.toml": telegraf_layer("true")})
    await d.until(lambda: state_is_number(d, "completed"), "the good rollout completes")
    await d.until(lambda: all_in_sync_at(fixed, ids[:2]), "the unpinned agents run the fix")
    done = (await rollouts.list_rollouts(d.admin, limit=1))[0]
    view = await rollouts.access_rollout(d.admin, done.number)
    assert [s.state for s in view.stages] == ["passed", "passed"]
    assert [s.agents_total for s in view.stages] == [1, 1]  # the pinned agent is not staged
    held = await d.agent(ids[2])
    assert held.desired_revision_id == first
    await d.same_artifact(held.desired_artifact, good[ids[2]])
    assert set(fleet[2][1].ran[since[ids[2]] :]) == {good[ids[2]].hex()}  # type: ignore[union-attr]

    await pins.delete_pin(d.admin, pinned.id)
    await d.until(lambda: all_in_sync_at(fixed, ids), "without the pin web-2 follows")


async def _desired(d: Delivery, agent_id: str, artifact: bytes | None) -> bool:
    return (await d.agent(agent_id)).desired_artifact == artifact


async def state_is_number(d: Delivery, state: str) -> bool:
    [latest] = await rollouts.list_rollouts(d.admin, limit=1)
    return latest.state == state


async def test_a_canary_that_never_proves_the_change_halts_on_apply_failures(
    delivery: Delivery,
) -> None:
    d = delivery
    first = await publish(d.services.pool, d.tenant_id, tree())
    fleet = [
        await d.enroll(name, group) for name, group in (("canary-1", "canary"), ("web-1", "fleet"))
    ]
    ids = [e["agent_id"] for e, _ in fleet]

    async def all_in_sync_at(revision: int) -> bool:
        found = [await d.agent(a) for a in ids]
        return all(a.sync == "in_sync" and a.applied_revision_id == revision for a in found)

    await d.until(lambda: all_in_sync_at(first), "the fleet runs r1")
    good = {a: (await d.agent(a)).desired_artifact for a in ids}
    since = len(fleet[1][1].ran) - 1  # web-1's run of r1 (earlier starts may be older renders)
    # the canary's Telegraf is down when the change ships: it never fetches nor proves it
    d.tasks[0].cancel()
    await asyncio.gather(d.tasks[0], return_exceptions=True)
    changed = await d.merge({"layers/base.toml": telegraf_layer("true")})
    [ro] = await rollouts.list_rollouts(d.admin, limit=1)
    assert ro.to_revision_id == changed

    async def halted() -> bool:
        return (await rollouts.access_rollout(d.admin, ro.number)).rollout.state == "halted"

    await d.until(halted, "the rollout halts at the canary's bake")
    view = await rollouts.access_rollout(d.admin, ro.number)
    assert view.rollout.halt_reason is not None
    assert "stage canary: maxApplyFailurePercent: 1 of 1 agents" in view.rollout.halt_reason
    canary = await d.agent(ids[0])
    assert canary.sync == "updating"
    assert canary.applied_revision_id == first
    web = await d.agent(ids[1])  # the later stage never received it
    await d.same_artifact(web.desired_artifact, good[ids[1]])
    assert set(fleet[1][1].ran[since:]) == {good[ids[1]].hex()}  # type: ignore[union-attr]

    await rollouts.abort_rollout(d.admin, ro.number)
    d.start(fleet[0][0])  # the host is back
    await d.until(lambda: all_in_sync_at(first), "every agent runs r1 again")
    await d.same_artifact((await d.agent(ids[0])).desired_artifact, good[ids[0]])
