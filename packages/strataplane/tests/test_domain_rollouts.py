"""Rollout rules as properties: the desired-revision order, the step a rollout takes next,
and the guardrails of a stage."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st
from strataplane.domain.rollouts import (
    Pin,
    StageAgent,
    StageView,
    active_pin,
    desired_revision,
    evaluate,
    next_step,
    plan_of,
)

NOW = datetime(2026, 1, 1, tzinfo=UTC)
AGENT = uuid.UUID(int=1)

syncs = st.sampled_from(["in_sync", "updating", "out_of_sync", "render_error"])
healths = st.sampled_from(["pending", "healthy", "degraded", "failed", "not_reporting"])
agents = st.builds(StageAgent, syncs, healths, st.one_of(st.none(), healths))


def pin(revision: int, age: int, *, own: bool, expired: bool = False) -> Pin:
    created = NOW - timedelta(seconds=age)
    return Pin(
        uuid.uuid4(),
        revision,
        created,
        created,
        NOW - timedelta(seconds=1) if expired else None,
        AGENT if own else None,
        None if own else {"matchLabels": {"env": "prod"}},
        None if own else ("telegraf",),
    )


@given(
    st.lists(st.tuples(st.integers(1, 9), st.integers(1, 1000), st.booleans(), st.booleans())),
    st.one_of(st.none(), st.integers(1, 9)),
    st.integers(1, 9),
)
def test_pin_then_assignment_then_pointer(
    raw: list[tuple[int, int, bool, bool]], assigned: int | None, pointer: int
) -> None:
    pins = [pin(r, age, own=own, expired=gone) for r, age, own, gone in raw]
    held = active_pin(pins, AGENT, "telegraf", {"env": "prod"}, NOW)
    live = [p for p in pins if p.expires_at is None]
    revision, source = desired_revision(held, assigned, pointer)
    if live:
        own = [p for p in live if p.agent_instance_id is not None]
        best = max(own or live, key=lambda p: p.created_at)
        assert held is not None
        assert held.created_at == best.created_at
        assert source == "pin"
    elif assigned is not None:
        assert (revision, source) == (assigned, "rollout")
    else:
        assert (revision, source) == (pointer, "release")
    # a selector pin holds only the kinds and hosts it names
    assert (
        active_pin(
            [p for p in live if p.agent_instance_id is None], AGENT, "vector", {"env": "prod"}, NOW
        )
        is None
    )
    assert (
        active_pin(
            [p for p in live if p.agent_instance_id is None], AGENT, "telegraf", {"env": "dev"}, NOW
        )
        is None
    )


@given(st.lists(st.integers(0, 30), min_size=1, max_size=8), st.lists(st.booleans(), max_size=8))
def test_a_running_rollout_walks_its_stages_in_order_and_completes(
    bakes: list[int], empty: list[bool]
) -> None:
    stages = {i: StageView(i, "pending", None, timedelta(seconds=b)) for i, b in enumerate(bakes)}
    now, seen, steps = NOW, [], 0
    while True:
        steps += 1
        assert steps < 1000
        step = next_step("running", list(stages.values()), now)
        if step.action == "complete":
            break
        if step.action == "wait":
            assert step.idx is not None
            now += timedelta(seconds=1)
            continue
        assert step.idx is not None
        s = stages[step.idx]
        if step.action == "start":
            seen.append(step.idx)
            skipped = step.idx < len(empty) and empty[step.idx]
            stages[step.idx] = StageView(s.idx, "skipped" if skipped else "running", now, s.bake)
        else:
            assert s.started_at is not None
            assert s.started_at + s.bake <= now
            stages[step.idx] = StageView(s.idx, "passed", s.started_at, s.bake)
    assert seen == sorted(stages)
    assert all(s.state in ("passed", "skipped") for s in stages.values())
    for state in ("paused", "halted", "completed", "aborted"):
        assert next_step(state, list(stages.values()), now).action == "wait"


@given(st.lists(agents, max_size=30), st.floats(0, 100), st.floats(0, 100))
def test_a_stage_breaches_exactly_past_its_limits(
    members: list[StageAgent], apply_max: float, health_max: float
) -> None:
    limits = {"maxApplyFailurePercent": apply_max, "maxHealthRegressionPercent": health_max}
    result = evaluate(members, limits)
    failed = sum(a.sync != "in_sync" for a in members)
    percent = 100.0 * failed / len(members) if members else 0.0
    if round(percent, 3) > apply_max:
        assert result.breached is not None
        assert result.breached.startswith("maxApplyFailurePercent")
    elif result.breached is not None:
        assert result.breached.startswith("maxHealthRegressionPercent")
    # one more agent that applied and stayed healthy never turns a pass into a breach
    if result.breached is None:
        fine = StageAgent("in_sync", "healthy", "healthy")
        assert evaluate([*members, fine], limits).breached is None


def test_regressions_follow_the_schema_order() -> None:
    def regressed(health: str, baseline: str | None, kind: str = "server") -> bool:
        r = evaluate([StageAgent("in_sync", health, baseline, kind)], {})
        return r.values["healthRegressions"] == 1

    assert regressed("degraded", "healthy")
    assert regressed("not_reporting", "healthy")
    assert not regressed("not_reporting", "healthy", "client")
    assert not regressed("failed", "pending")
    assert not regressed("degraded", "failed")
    assert regressed("failed", "degraded")


def test_a_policy_becomes_stages_and_guardrails() -> None:
    stages, guardrails = plan_of(
        {
            "stages": [
                {"name": "canary", "bakeTime": "30m", "selector": {"matchLabels": {"c": "1"}}},
                {"name": "rest"},
            ],
            "guardrails": {"maxHealthRegressionPercent": 5.0},
        }
    )
    assert [(s.name, s.bake) for s in stages] == [
        ("canary", timedelta(minutes=30)),
        ("rest", timedelta(0)),
    ]
    assert guardrails == {
        "maxApplyFailurePercent": 0,
        "maxHealthRegressionPercent": 5.0,
        "journeys": [],
    }
    assert [s.name for s in plan_of(None)[0]] == ["all"]


def test_every_guardrail_kind_is_evaluated_and_journeys_report_no_data() -> None:
    members = [
        StageAgent("out_of_sync", "healthy", "healthy"),  # a refused reload
        StageAgent("render_error", "healthy", "healthy"),  # never received the artifact
        StageAgent("in_sync", "not_reporting", "healthy"),  # stopped reporting
        StageAgent("in_sync", "degraded", "healthy"),  # errors in its heartbeats
        StageAgent("in_sync", "healthy", "healthy"),
    ]
    limits = {
        "maxApplyFailurePercent": 50,
        "maxHealthRegressionPercent": 50,
        "journeys": ["portal-login"],
    }
    result = evaluate(members, limits)
    assert result.breached is None
    assert result.values == {
        "agents": 5,
        "applied": 3,
        "applyFailures": 2,
        "applyFailurePercent": 40.0,
        "healthRegressions": 2,
        "healthRegressionPercent": 40.0,
        "notReporting": 1,
        "degraded": 1,
        "failed": 0,
        "journeys": {"portal-login": "no data"},  # journeys do not run yet: never a breach
    }
    tight = evaluate(members, {**limits, "maxApplyFailurePercent": 39})
    assert tight.breached is not None
    assert tight.breached.startswith("maxApplyFailurePercent: 2")
    sick = evaluate(members, {**limits, "maxHealthRegressionPercent": 39})
    assert sick.breached is not None
    assert sick.breached.startswith("maxHealthRegressionPercent: 2")
