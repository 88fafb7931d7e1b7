"""Rollouts: created by a merge (or by an operator) from the tenant's RolloutPolicy, operated
with pause, resume, advance and abort, each audited. The controller side (stages starting,
bake times, guardrails) is ``controllers/rollouts.py``; both write through this module.

One rollout is active per tenant and agent kind: a merge while one is active is refused
(409 rollout.active) so a second change never rides on a stage whose guardrails judged
another; finish, resume or abort the active rollout first.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from platformkit.db.scope import Conn
from platformkit.ids import uuid7

from strataplane import errors
from strataplane.actions.access import tenant_tx
from strataplane.actions.context import Ctx
from strataplane.domain.rollouts import plan_of
from strataplane.render.service import RENDERER
from strataplane.render.trees import SpecTree
from strataplane.store import counters, fleet_notify, fleet_spec, revisions, rollouts
from strataplane.store.rollouts import Rollout, Stage

__all__ = [
    "RolloutView",
    "abort_rollout",
    "access_rollout",
    "advance_rollout",
    "begin_rollout",
    "create_rollout",
    "list_rollouts",
    "pause_rollout",
    "resume_rollout",
]


def policy_of(
    tree: SpecTree, kind: str, name: str | None
) -> tuple[str | None, Mapping[str, Any] | None]:
    """The RolloutPolicy a rollout uses: the one named, else Settings rollout.defaultPolicy;
    none (a single stage) when neither names one or the policy excludes the agent kind."""
    if name is None:
        rollout = tree.objects.get("settings.toml", {}).get("rollout", {})
        chosen = rollout.get("defaultPolicy") if isinstance(rollout, Mapping) else None
        name = chosen if isinstance(chosen, str) else None
    if name is None:
        return None, None
    policy = tree.objects.get(f"policies/rollout/{name}.toml")
    if policy is None:
        raise errors.RolloutInvalidState(f"no RolloutPolicy {name!r} at the target revision")
    kinds = policy.get("agentKinds")
    if isinstance(kinds, list) and kind not in kinds:
        return None, None
    return name, policy


async def begin_rollout(
    conn: Conn,
    tenant_id: UUID,
    kind: str,
    to_revision: int,
    created_by: UUID | None,
    *,
    policy: str | None = None,
    staged: bool = True,
) -> Rollout | None:
    """A rollout of ``kind`` from the release pointer to ``to_revision``, its stages pending
    (the controller starts them; the NOTIFY wakes it at commit). None when the pointer is
    already there, or (``staged`` False: no agent is impacted) when it moved at once."""
    from_revision = await fleet_spec.pointer(conn, tenant_id, kind)
    if from_revision is None:  # the first release: no agent had a configuration
        await fleet_spec.set_release(conn, tenant_id, kind, to_revision, created_by)
        await fleet_notify.release_moved(conn, tenant_id)
        return None
    if from_revision == to_revision:
        return None
    active = await rollouts.active_rollout(conn, tenant_id, kind, lock=True)
    if active is not None:
        # even a change that impacts no agent waits: moving the pointer would hand the active
        # rollout's revision, unstaged, to every agent it has not reached yet
        raise errors.RolloutActive(
            f"RO-{active.number} ({active.state}) is delivering r{active.to_revision_id}: "
            "let it complete, or resume or abort it first"
        )
    if not staged:
        await fleet_spec.set_release(conn, tenant_id, kind, to_revision, created_by)
        await fleet_notify.release_moved(conn, tenant_id)
        return None
    tree = await RENDERER.tree(conn, tenant_id, to_revision)
    name, found = policy_of(tree, kind, policy)
    stages, guardrails = plan_of(found)
    rollout_id = uuid7()
    number = await counters.take(conn, tenant_id, "rollout")
    await rollouts.insert_rollout(
        conn,
        tenant_id,
        rollout_id,
        number=number,
        agent_kind=kind,
        from_revision_id=from_revision,
        to_revision_id=to_revision,
        policy_name=name,
        guardrails=guardrails,
        created_by=created_by,
        stages=stages,
    )
    await fleet_notify.release_moved(conn, tenant_id)
    found_rollout = await rollouts.get_rollout(conn, tenant_id, rollout_id)
    assert found_rollout is not None
    return found_rollout


@dataclass(frozen=True)
class RolloutView:
    rollout: Rollout
    stages: list[Stage]
    progress: dict[int, dict[str, int]]


async def _view(conn: Conn, tenant_id: UUID, rollout: Rollout) -> RolloutView:
    stages = await rollouts.stages(conn, tenant_id, rollout.id)
    return RolloutView(rollout, stages, await rollouts.progress(conn, tenant_id, rollout.id))


def _ref(ref: str | UUID | int) -> UUID | int:
    if isinstance(ref, UUID | int):
        return ref
    text = ref.upper().removeprefix("RO-")
    if text.isdigit():
        return int(text)
    try:
        return UUID(ref)
    except ValueError:
        raise errors.RolloutNotFound() from None


async def access_rollout(ctx: Ctx, ref: str | UUID | int) -> RolloutView:
    async with tenant_tx(ctx) as tx:
        tx.require("inventory.read")
        found = await rollouts.get_rollout(tx.conn, tx.tenant_id, _ref(ref))
        if found is None:
            raise errors.RolloutNotFound()
        return await _view(tx.conn, tx.tenant_id, found)


async def list_rollouts(ctx: Ctx, *, state: str | None = None, limit: int = 50) -> list[Rollout]:
    async with tenant_tx(ctx) as tx:
        tx.require("inventory.read")
        return await rollouts.list_rollouts(tx.conn, tx.tenant_id, state=state, limit=limit)


async def create_rollout(
    ctx: Ctx, kind: str, to_revision: int, *, policy: str | None = None
) -> RolloutView:
    """An operator's rollout to a revision (a revert to an earlier one, or again after an
    abort), staged like a merge's."""
    from strataplane.actions.change_sets import RevisionNotFound  # it imports this module

    async with tenant_tx(ctx) as tx:
        tx.require("rollout.manage")
        if await revisions.get_revision(tx.conn, tx.tenant_id, to_revision) is None:
            raise RevisionNotFound(f"this tenant has no revision {to_revision}")
        created = await begin_rollout(
            tx.conn, tx.tenant_id, kind, to_revision, ctx.user_id, policy=policy
        )
        if created is None:
            raise errors.RolloutInvalidState(f"{kind} agents are already released at that revision")
        view = await _view(tx.conn, tx.tenant_id, created)
        details = {"number": created.number, "to": to_revision, "policy": created.policy_name}
        await tx.audit("rollout.create", "rollout", created.id, details)
        return view


_ALLOWED = {
    "pause": ("running",),
    "resume": ("paused", "halted"),
    "advance": ("running",),
    "abort": ("running", "paused", "halted"),
}


async def _operate(ctx: Ctx, ref: str | UUID | int, verb: str) -> RolloutView:
    async with tenant_tx(ctx) as tx:
        tx.require("rollout.pause" if verb == "pause" else "rollout.manage")
        found = await rollouts.get_rollout(tx.conn, tx.tenant_id, _ref(ref), lock=True)
        if found is None:
            raise errors.RolloutNotFound()
        if found.state not in _ALLOWED[verb]:
            raise errors.RolloutInvalidState(
                f"RO-{found.number} is {found.state}: {verb} needs " + " or ".join(_ALLOWED[verb]),
                state=found.state,
            )
        details: dict[str, Any] = {"number": found.number, "from_state": found.state}
        if verb == "pause":
            await rollouts.set_state(tx.conn, tx.tenant_id, found.id, "paused", keep_reason=True)
        elif verb == "resume":
            # resuming a halt accepts the breach: the halted stage stays breached and the
            # next stage starts
            details["accepted"] = found.halt_reason
            await rollouts.set_state(tx.conn, tx.tenant_id, found.id, "running")
        elif verb == "advance":
            for stage in await rollouts.stages(tx.conn, tx.tenant_id, found.id):
                if stage.state == "running":
                    await rollouts.end_bake(tx.conn, tx.tenant_id, found.id, stage.idx)
                    details["stage"] = stage.name
        else:
            await rollouts.set_state(tx.conn, tx.tenant_id, found.id, "aborted", keep_reason=True)
        await fleet_notify.release_moved(tx.conn, tx.tenant_id)
        await tx.audit(f"rollout.{verb}", "rollout", found.id, details)
        current = await rollouts.get_rollout(tx.conn, tx.tenant_id, found.id)
        assert current is not None
        return await _view(tx.conn, tx.tenant_id, current)


async def pause_rollout(ctx: Ctx, ref: str | UUID | int) -> RolloutView:
    return await _operate(ctx, ref, "pause")


async def resume_rollout(ctx: Ctx, ref: str | UUID | int) -> RolloutView:
    return await _operate(ctx, ref, "resume")


async def advance_rollout(ctx: Ctx, ref: str | UUID | int) -> RolloutView:
    return await _operate(ctx, ref, "advance")


async def abort_rollout(ctx: Ctx, ref: str | UUID | int) -> RolloutView:
    return await _operate(ctx, ref, "abort")
