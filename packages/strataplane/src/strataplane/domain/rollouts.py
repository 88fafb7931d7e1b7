"""Rollout rules (schema: rollout, rollout_stage, rollout_assignment, pin; spec-format.md §3.7):
the stage plan a RolloutPolicy gives, the desired revision of an agent, which step a running
rollout takes next, and the guardrails of a stage after its bake time. Pure functions.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Literal
from uuid import UUID

from strataplane.domain.spec.diagnostics import SpecError
from strataplane.domain.spec.fields import parse_duration
from strataplane.domain.spec.selectors import selector_from_json

__all__ = [
    "DEFAULT_GUARDRAILS",
    "Evaluation",
    "Pin",
    "StageAgent",
    "StagePlan",
    "StageView",
    "Step",
    "active_pin",
    "desired_revision",
    "evaluate",
    "next_step",
    "plan_of",
]

DEFAULT_GUARDRAILS: dict[str, Any] = {
    "maxApplyFailurePercent": 0,
    "maxHealthRegressionPercent": 0,
    "journeys": [],
}
ACTIVE = ("running", "paused", "halted")


@dataclass(frozen=True)
class StagePlan:
    name: str
    selector: Mapping[str, Any]
    bake: timedelta


def plan_of(policy: Mapping[str, Any] | None) -> tuple[list[StagePlan], dict[str, Any]]:
    """The stages and guardrails a rollout copies from a (validated) RolloutPolicy; without a
    policy a single stage of every impacted agent, no bake time."""
    if policy is None:
        return [StagePlan("all", {}, timedelta(0))], dict(DEFAULT_GUARDRAILS)
    stages = []
    for stage in policy.get("stages", []):
        ms = parse_duration(str(stage.get("bakeTime", "0s"))) or 0
        selector = dict(stage.get("selector", {}))
        stages.append(StagePlan(stage["name"], selector, timedelta(milliseconds=ms)))
    return stages, {**DEFAULT_GUARDRAILS, **dict(policy.get("guardrails", {}))}


@dataclass(frozen=True)
class Pin:
    id: UUID
    revision_id: int
    created_at: datetime
    starts_at: datetime
    expires_at: datetime | None
    agent_instance_id: UUID | None = None
    selector: Mapping[str, Any] | None = None
    agent_kinds: tuple[str, ...] | None = None

    def active(self, now: datetime) -> bool:
        return self.starts_at <= now and (self.expires_at is None or now < self.expires_at)

    def holds(self, agent_id: UUID, kind: str, labels: Mapping[str, str]) -> bool:
        if self.agent_instance_id is not None:
            return self.agent_instance_id == agent_id
        if kind not in (self.agent_kinds or ()):
            return False
        try:
            return selector_from_json(self.selector or {}).matches(labels)
        except SpecError:
            return False


def active_pin(
    pins: Sequence[Pin], agent_id: UUID, kind: str, labels: Mapping[str, str], now: datetime
) -> Pin | None:
    """The pin that holds an agent: its own pins first, then selector pins; newest first."""
    holding = [p for p in pins if p.active(now) and p.holds(agent_id, kind, labels)]
    if not holding:
        return None
    return min(holding, key=lambda p: (p.agent_instance_id is None, -p.created_at.timestamp()))


def desired_revision(
    pin: Pin | None, assigned_revision: int | None, pointer: int
) -> tuple[int, Literal["pin", "rollout", "release"]]:
    """First match wins: an active pin, an assignment in an active rollout, the release
    pointer of the agent's kind (schema: release)."""
    if pin is not None:
        return pin.revision_id, "pin"
    if assigned_revision is not None:
        return assigned_revision, "rollout"
    return pointer, "release"


@dataclass(frozen=True)
class StageView:
    idx: int
    state: str  # rollout_stage_state
    started_at: datetime | None
    bake: timedelta


@dataclass(frozen=True)
class Step:
    action: Literal["wait", "start", "evaluate", "complete"]
    idx: int | None = None


def next_step(state: str, stages: Sequence[StageView], now: datetime) -> Step:
    """What a rollout in ``state`` does now: a running stage is evaluated once its bake time
    has passed; without one the next pending stage starts; with none left the rollout
    completes. Paused, halted and finished rollouts wait."""
    if state != "running":
        return Step("wait")
    for stage in sorted(stages, key=lambda s: s.idx):
        if stage.state == "running":
            assert stage.started_at is not None
            if stage.started_at + stage.bake <= now:
                return Step("evaluate", stage.idx)
            return Step("wait", stage.idx)
        if stage.state == "pending":
            return Step("start", stage.idx)
    return Step("complete")


@dataclass(frozen=True)
class StageAgent:
    sync: str
    health: str
    baseline: str | None
    host_kind: str = "server"


_RANK = {"healthy": 0, "degraded": 1, "failed": 2, "not_reporting": 1}


def _regressed(a: StageAgent) -> bool:
    """Worse than the baseline: healthy < degraded < failed; not_reporting is worse than
    healthy except on client hosts; a pending baseline (or health) is not compared."""
    if a.baseline in (None, "pending") or a.health == "pending":
        return False
    now = 0 if a.health == "not_reporting" and a.host_kind == "client" else _RANK[a.health]
    return now > _RANK.get(str(a.baseline), 0)


@dataclass(frozen=True)
class Evaluation:
    breached: str | None
    values: dict[str, Any] = field(default_factory=dict)


def _percent(part: int, whole: int) -> float:
    return round(100.0 * part / whole, 3) if whole else 0.0


def evaluate(agents: Sequence[StageAgent], guardrails: Mapping[str, Any]) -> Evaluation:
    """A stage's guardrails over its agents when its bake time ends. An agent that has not
    proven the new artifact by a heartbeat by then (not ``in_sync``: out of sync, a render
    error, a stopped agent still ``updating``) counts as an apply failure; a health worse than
    before the change as a regression (a ``pending`` baseline is not compared). A listed Journey
    has no data: journeys do not run yet (no ``journey_state``), so it is reported as
    ``"no data"`` and never breaches."""
    failed = sum(a.sync != "in_sync" for a in agents)
    regressed = sum(_regressed(a) for a in agents)
    values: dict[str, Any] = {
        "agents": len(agents),
        "applied": len(agents) - failed,
        "applyFailures": failed,
        "applyFailurePercent": _percent(failed, len(agents)),
        "healthRegressions": regressed,
        "healthRegressionPercent": _percent(regressed, len(agents)),
        "notReporting": sum(a.health == "not_reporting" for a in agents),
        "degraded": sum(a.health == "degraded" for a in agents),
        "failed": sum(a.health == "failed" for a in agents),
    }
    journeys = guardrails.get("journeys") or []
    if journeys:
        values["journeys"] = {str(name): "no data" for name in journeys}
    apply_max = float(guardrails.get("maxApplyFailurePercent", 0))
    health_max = float(guardrails.get("maxHealthRegressionPercent", 0))
    if values["applyFailurePercent"] > apply_max:
        return Evaluation(
            f"maxApplyFailurePercent: {failed} of {len(agents)} agents "
            f"({values['applyFailurePercent']}%) did not apply the new configuration "
            f"(limit {apply_max:g}%)",
            values,
        )
    if values["healthRegressionPercent"] > health_max:
        return Evaluation(
            f"maxHealthRegressionPercent: {regressed} of {len(agents)} agents "
            f"({values['healthRegressionPercent']}%) are less healthy than before "
            f"(limit {health_max:g}%)",
            values,
        )
    return Evaluation(None, values)
