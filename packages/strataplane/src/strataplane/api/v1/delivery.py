"""Safe delivery: rollouts (list, show with per-stage progress, create, pause, resume, advance,
abort), pins (list, create, delete) and the plugin catalog (list bundles, read a schema)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any, Literal
from uuid import UUID

from fastapi import APIRouter, Depends, Response
from pydantic import Field

from strataplane.actions import catalog, pins, rollouts
from strataplane.actions.rollouts import RolloutView
from strataplane.api.deps import TenantCtx, idempotency_key
from strataplane.api.v1.common import Model, PageLimit
from strataplane.store.pins import PinRow
from strataplane.store.rollouts import Rollout

router = APIRouter(tags=["delivery"])

AgentKind = Literal["telegraf", "elastic-agent", "strataplane-agent", "vector"]


class RolloutOut(Model):
    id: UUID
    number: int
    name: str = Field(description="RO-<number>")
    agent_kind: str
    from_revision_id: int
    to_revision_id: int
    policy_name: str | None
    guardrails: dict[str, Any]
    state: str
    halt_reason: str | None
    created_by: UUID | None
    created_at: datetime
    finished_at: datetime | None

    @classmethod
    def of(cls, r: Rollout) -> RolloutOut:
        return cls.model_validate({**r.__dict__, "name": f"RO-{r.number}"})


class StageOut(Model):
    idx: int
    name: str
    selector: dict[str, Any]
    bake_seconds: float
    state: str
    agents_total: int | None
    assigned: int
    in_sync: int
    not_reporting: int
    guardrails: dict[str, Any] | None = Field(description="The values last evaluated.")
    started_at: datetime | None
    finished_at: datetime | None


class RolloutDetailOut(RolloutOut):
    stages: list[StageOut]

    @classmethod
    def of_view(cls, v: RolloutView) -> RolloutDetailOut:
        stages = []
        for s in v.stages:
            p = v.progress.get(s.idx, {})
            stages.append(
                StageOut(
                    idx=s.idx,
                    name=s.name,
                    selector=s.selector,
                    bake_seconds=s.bake_time.total_seconds(),
                    state=s.state,
                    agents_total=s.agents_total,
                    assigned=p.get("assigned", 0),
                    in_sync=p.get("inSync", 0),
                    not_reporting=p.get("notReporting", 0),
                    guardrails=s.guardrails,
                    started_at=s.started_at,
                    finished_at=s.finished_at,
                )
            )
        base = RolloutOut.of(v.rollout).model_dump()
        return cls.model_validate({**base, "stages": stages})


class RolloutIn(Model):
    agent_kind: AgentKind = "telegraf"
    to_revision: int = Field(ge=1, le=2**63 - 1)
    policy: str | None = Field(None, max_length=63, description="RolloutPolicy; default Settings")


@router.get("/rollouts")
async def list_rollouts(
    ctx: TenantCtx, state: str | None = None, limit: PageLimit = 50
) -> list[RolloutOut]:
    return [RolloutOut.of(r) for r in await rollouts.list_rollouts(ctx, state=state, limit=limit)]


@router.post("/rollouts", status_code=201, dependencies=[Depends(idempotency_key)])
async def create_rollout(ctx: TenantCtx, body: RolloutIn) -> RolloutDetailOut:
    view = await rollouts.create_rollout(ctx, body.agent_kind, body.to_revision, policy=body.policy)
    return RolloutDetailOut.of_view(view)


@router.get("/rollouts/{ref}")
async def get_rollout(ctx: TenantCtx, ref: str) -> RolloutDetailOut:
    """``ref``: RO-17, 17 or the rollout's id."""
    return RolloutDetailOut.of_view(await rollouts.access_rollout(ctx, ref))


def _verb(name: str, doc: str) -> None:
    action = getattr(rollouts, f"{name}_rollout")

    async def operate(ctx: TenantCtx, ref: str) -> RolloutDetailOut:
        return RolloutDetailOut.of_view(await action(ctx, ref))

    operate.__doc__ = doc
    operate.__name__ = f"{name}_rollout"
    router.post(f"/rollouts/{{ref}}/{name}", dependencies=[Depends(idempotency_key)])(operate)


_verb("pause", "Stop a running rollout where it is.")
_verb("resume", "Continue a paused or halted rollout (resuming a halt accepts the breach).")
_verb("advance", "End the running stage's bake time now; its guardrails are evaluated.")
_verb("abort", "End the rollout: its agents fall back to the release pointer.")


class PinOut(Model):
    id: UUID
    revision_id: int
    reason: str
    agent_instance_id: UUID | None
    selector: dict[str, Any] | None
    agent_kinds: list[str] | None
    created_by: UUID | None
    created_at: datetime
    starts_at: datetime
    expires_at: datetime | None

    @classmethod
    def of(cls, p: PinRow) -> PinOut:
        return cls.model_validate(p.__dict__)


class PinIn(Model):
    revision: int = Field(ge=1, le=2**63 - 1)
    reason: str = Field(min_length=1, max_length=1000)
    agent_id: UUID | None = None
    selector: dict[str, Any] | None = None
    agent_kinds: list[AgentKind] | None = None
    expires_in_seconds: int | None = Field(None, ge=1, le=10 * 365 * 86400)


@router.get("/pins")
async def list_pins(ctx: TenantCtx, active: bool = False) -> list[PinOut]:
    return [PinOut.of(p) for p in await pins.list_pins(ctx, active_only=active)]


@router.post("/pins", status_code=201, dependencies=[Depends(idempotency_key)])
async def create_pin(ctx: TenantCtx, body: PinIn) -> PinOut:
    expires = None
    if body.expires_in_seconds is not None:
        expires = datetime.now(UTC) + timedelta(seconds=body.expires_in_seconds)
    row = await pins.create_pin(
        ctx,
        revision_id=body.revision,
        reason=body.reason,
        agent_id=body.agent_id,
        selector=body.selector,
        agent_kinds=list(body.agent_kinds) if body.agent_kinds is not None else None,
        expires_at=expires,
    )
    return PinOut.of(row)


@router.delete("/pins/{pin_id}", status_code=204)
async def delete_pin(ctx: TenantCtx, pin_id: UUID) -> Response:
    await pins.delete_pin(ctx, pin_id)
    return Response(status_code=204)


class BundleOut(Model):
    id: UUID
    agent_kind: str
    version: str
    bundle_hash: str
    contents: dict[str, Any]
    imported_at: datetime


@router.get("/catalog")
async def list_catalog(ctx: TenantCtx, agent_kind: AgentKind | None = None) -> list[BundleOut]:
    rows = await catalog.list_bundles(ctx, agent_kind)
    return [
        BundleOut.model_validate({**r.__dict__, "bundle_hash": r.bundle_hash.hex()}) for r in rows
    ]


@router.get("/catalog/{agent_kind}/{version}/{section}/{plugin}")
async def get_plugin_schema(
    ctx: TenantCtx, agent_kind: AgentKind, version: str, section: str, plugin: str
) -> dict[str, Any]:
    """The JSON Schema 2020-12 of one plugin in one agent version's bundle."""
    return await catalog.plugin_schema(ctx, agent_kind, version, section, plugin)
