"""The alert rules' pure parts: what a rule may say, when it fires and resolves, which notices
each channel is owed, and which webhook addresses are allowed."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from z4j.domain.alerts import (
    MAX_ATTEMPTS,
    Kind,
    Phase,
    RuleInvalid,
    RuleSpec,
    Step,
    decide,
    owed,
    parse_rule,
    webhook_masked,
)

values = st.one_of(st.none(), st.floats(0, 1e6, allow_nan=False))
thresholds = st.floats(0, 1e6, allow_nan=False)
RULE = RuleSpec("r", Kind.FAILURE_RATE, 10, webhook_url="https://h/x",
                emails=("a@example.com", "b@example.com"))  # fmt: skip
CHANNELS = ["webhook", "email:a@example.com", "email:b@example.com"]
done_maps = st.dictionaries(st.sampled_from(CHANNELS), st.just("t"))


@given(st.booleans(), values, thresholds)
def test_fire_only_when_over_and_resolve_only_when_not(
    is_open: bool, value: float | None, threshold: float
) -> None:
    step = decide(is_open, value, threshold)
    over = value is not None and value > threshold
    assert (step is Step.FIRE) == (over and not is_open)
    assert (step is Step.RESOLVE) == (is_open and not over)


@given(st.booleans(), done_maps, done_maps, st.integers(0, 2 * MAX_ATTEMPTS))
def test_each_channel_is_owed_its_start_then_its_end_once(
    resolved: bool, started: dict[str, str], ended: dict[str, str], attempts: int
) -> None:
    notices = {"firing": started, "resolved": ended}
    out = owed(resolved, notices, RULE, attempts)
    if attempts >= MAX_ATTEMPTS:
        assert out == {}
        return
    for channel in CHANNELS:
        expect = ([Phase.FIRING] if channel not in started else []) + (
            [Phase.RESOLVED] if resolved and channel not in ended else []
        )
        assert out.get(channel, []) == expect


def test_a_rule_without_channels_owes_nothing() -> None:
    assert owed(True, {}, RuleSpec("r", Kind.QUEUE_DEPTH, 1), 0) == {}


BASE: dict[str, Any] = {"name": "r", "kind": "failure_rate", "threshold": 5}


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"kind": "nope"}, "kind"),
        ({"threshold": -1}, "threshold"),
        ({"threshold": float("inf")}, "threshold"),
        ({"threshold": True}, "threshold"),
        ({"threshold": 100.5}, "threshold"),
        ({"name": " "}, "name"),
        ({"name": "a\nb"}, "name"),
        ({"window_seconds": 59}, "window_seconds"),
        ({"min_tasks": 0}, "min_tasks"),
        ({"queue": "q", "kind": "agent_offline"}, "queue"),
        ({"task_name": "t", "kind": "worker_offline"}, "task_name"),
        ({"agent_name": "a"}, "agent_name"),
        ({"webhook_url": "javascript:alert(1)"}, "webhook_url"),
        ({"emails": ["a@b"] * 11}, "emails"),
        ({"extra": 1}, "extra"),
    ],
)
def test_a_bad_field_is_named(change: dict[str, Any], field: str) -> None:
    with pytest.raises(RuleInvalid) as caught:
        parse_rule({**BASE, **change})
    assert caught.value.field == field


def test_a_change_keeps_what_it_does_not_name() -> None:
    first = parse_rule(
        {**BASE, "queue": "billing", "emails": ["Ops@Example.com", "ops@example.com"]}
    )
    assert first.emails == ("ops@example.com",)
    second = parse_rule({"threshold": 7.5, "queue": None}, first)
    assert (second.threshold, second.queue, second.emails) == (7.5, None, first.emails)
    assert RuleSpec.of_row({**second.as_row()}) == second


def test_a_masked_webhook_keeps_only_its_host() -> None:
    assert webhook_masked("https://hooks.example.com/T0/B1/secret") == "https://hooks.example.com/…"
    assert webhook_masked(None) is None
