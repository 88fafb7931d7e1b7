"""The rollout controller: for each agent kind's active rollout of a tenant, take the steps
``domain/rollouts.next_step`` gives until it says wait, each in the transaction that holds the
rollout's row lock (operators' pause, resume, advance and abort take the same lock):

- start a stage: assign every agent of the kind its selector matches that no earlier stage
  took, that no pin holds and whose render at to_revision differs from the one at
  from_revision (a render that fails differs), with its health as the baseline; render and
  write them at once; a stage that takes none is skipped;
- evaluate a stage whose bake time passed: its guardrails over the agents still assigned and
  not pinned; passed starts the next stage, breached halts the rollout with the reason;
- complete: the release pointer moves to to_revision.

Every step is audited (actor system). Safe to repeat: each step re-reads the rows it acts on.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any
from uuid import UUID

from platformkit.db.scope import Conn, Pool, tenant_transaction

from strataplane.actions.fleet_desired import write_by_rule
from strataplane.actions.fleet_rule import load_rule
from strataplane.db import SCOPE
from strataplane.domain.rollouts import StageView, evaluate, next_step
from strataplane.domain.spec.diagnostics import SpecError
from strataplane.domain.spec.selectors import selector_from_json
from strataplane.render.cache import RENDERED_KINDS
from strataplane.render.service import RENDERER
from strataplane.store import audit, fleet_spec, rollouts
from strataplane.store.fleet_desired import RenderInput, render_inputs
from strataplane.store.rollouts import Rollout

__all__ = ["step_rollouts"]

KINDS = RENDERED_KINDS
_BATCH = 5000
_MAX_STEPS = 50


async def step_rollouts(pool: Pool, tenant_id: UUID, agent_url: str) -> int:
    """Advance every active rollout of the tenant as far as it goes now; steps taken."""
    taken = 0
    for kind in KINDS:
        for _ in range(_MAX_STEPS):
            async with tenant_transaction(pool, SCOPE, tenant_id) as conn:
                moved = await _step(conn, tenant_id, kind, agent_url)
            if not moved:
                break
            taken += 1
    return taken


async def _audit(conn: Conn, tenant_id: UUID, action: str, r: Rollout, **details: Any) -> None:
    event = audit.Event(
        "system", None, action, "rollout", str(r.id), details={"number": r.number, **details}
    )
    await audit.append(conn, tenant_id, event)


async def _step(conn: Conn, tenant_id: UUID, kind: str, agent_url: str) -> bool:
    rollout = await rollouts.active_rollout(conn, tenant_id, kind, lock=True)
    if rollout is None:
        return False
    stages = await rollouts.stages(conn, tenant_id, rollout.id)
    views = [StageView(s.idx, s.state, s.started_at, s.bake_time) for s in stages]
    now = datetime.now(UTC)
    step = next_step(rollout.state, views, now)
    if step.action == "wait":
        return False
    if step.action == "complete":
        await fleet_spec.complete_release(conn, tenant_id, kind, rollout.to_revision_id, rollout.id)
        await rollouts.set_state(conn, tenant_id, rollout.id, "completed")
        await _audit(conn, tenant_id, "rollout.complete", rollout, to=rollout.to_revision_id)
        return True
    assert step.idx is not None
    stage = stages[step.idx]
    if step.action == "start":
        agents = await _candidates(conn, tenant_id, rollout, stage.selector, agent_url)
        await rollouts.start_stage(
            conn, tenant_id, rollout.id, stage.idx, [(a.id, h) for a, h in agents]
        )
        if agents:
            rule = await load_rule(conn, tenant_id, kind)
            assert rule is not None
            await write_by_rule(conn, tenant_id, [a for a, _ in agents], rule, agent_url)
        state = "running" if agents else "skipped"
        await _audit(
            conn,
            tenant_id,
            "rollout.stage_start",
            rollout,
            stage=stage.name,
            agents=len(agents),
            state=state,
        )
        return True
    rule = await load_rule(conn, tenant_id, kind)
    assert rule is not None
    assigned = await rollouts.stage_agents(conn, tenant_id, rollout.id, stage.idx)
    inputs = await render_inputs(conn, tenant_id, agent_ids=[i for i, _ in assigned])
    held = {a.id for a in inputs if rule.pin_of(a) is not None}  # pinned: out of the stage
    members = [agent for agent_id, agent in assigned if agent_id not in held]
    result = evaluate(members, rollout.guardrails)
    counts = {k: v for k, v in result.values.items() if isinstance(v, int)}  # audit: no floats
    if result.breached is None:
        await rollouts.finish_stage(conn, tenant_id, rollout.id, stage.idx, "passed", result.values)
        await _audit(conn, tenant_id, "rollout.stage_pass", rollout, stage=stage.name, **counts)
        return True
    await rollouts.finish_stage(conn, tenant_id, rollout.id, stage.idx, "breached", result.values)
    reason = f"stage {stage.name}: {result.breached}"
    await rollouts.set_state(conn, tenant_id, rollout.id, "halted", halt_reason=reason)
    await _audit(
        conn, tenant_id, "rollout.halt", rollout, stage=stage.name, reason=reason, **counts
    )
    return True


async def _candidates(
    conn: Conn, tenant_id: UUID, rollout: Rollout, selector: dict[str, Any], agent_url: str
) -> list[tuple[RenderInput, str]]:
    """(agent, baseline health) of the agents a starting stage takes."""
    try:
        match = selector_from_json(selector)
    except SpecError:
        return []
    taken = await rollouts.assigned(conn, tenant_id, rollout.id)
    rule = await load_rule(conn, tenant_id, rollout.agent_kind)
    assert rule is not None
    before = await RENDERER.tree(conn, tenant_id, rollout.from_revision_id)
    after = await RENDERER.tree(conn, tenant_id, rollout.to_revision_id)
    health = await _health(conn, tenant_id)
    out: list[tuple[RenderInput, str]] = []
    after_id: UUID | None = None
    while True:
        batch = await render_inputs(
            conn, tenant_id, kind=rollout.agent_kind, after=after_id, limit=_BATCH
        )
        if not batch:
            return out
        after_id = batch[-1].id
        for agent in batch:
            if agent.id in taken or rule.pin_of(agent) is not None:
                continue
            if not match.matches(agent.labels):
                continue
            args = (agent.kind, agent.version, agent.labels, agent_url)
            old = RENDERER.render(tenant_id, before, *args).artifact
            new = RENDERER.render(tenant_id, after, *args).artifact
            if new is not None and old is not None and old.hash == new.hash:
                continue
            out.append((agent, health.get(agent.id, "pending")))


async def _health(conn: Conn, tenant_id: UUID) -> dict[UUID, str]:
    cur = await conn.execute(
        "SELECT id, health::text AS health FROM agent_instance WHERE tenant_id = %s", (tenant_id,)
    )
    return {r["id"]: r["health"] for r in await cur.fetchall()}
