"""Elastic Agent's pure parts: the policy renderer, the long-poll duration and the health a
check-in reports."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st
from strataplane.agents.elastic import checkin_health, poll_seconds
from strataplane.agents.elastic_secrets import fill
from strataplane.render.elastic import render_elastic
from strataplane.store.fleet_elastic import Component

OUT = {"default": {"type": "elasticsearch", "hosts": ["https://es.example.com:9200"]}}


def test_the_policy_lists_inputs_by_id_with_their_outputs() -> None:
    out = render_elastic(
        {
            "outputs": OUT,
            "inputs": {
                "b": {"type": "system/logs", "use_output": "default"},
                "a": {"type": "system/metrics", "use_output": "default"},
            },
            "agent": {"monitoring": {"enabled": True}},
        }
    )
    assert out.content is not None
    policy = json.loads(out.content)
    assert [i["id"] for i in policy["inputs"]] == ["a", "b"]
    assert policy["outputs"] == OUT
    assert policy["agent"] == {"monitoring": {"enabled": True}}


@pytest.mark.parametrize(
    ("config", "code"),
    [
        ({"outputs": OUT, "inputs": {"a": {"type": "x", "use_output": "other"}}}, "SP-5008"),
        ({"outputs": OUT}, "SP-5001"),
        (
            {
                "outputs": OUT,
                "inputs": {
                    "a": {"type": "x", "use_output": "default", "k": "$co.elastic.secret{K}"}
                },
            },
            "SP-5001",
        ),
    ],
)
def test_what_cannot_run_is_a_render_error(config: dict[str, object], code: str) -> None:
    out = render_elastic(config)
    assert out.content is None
    assert [d.code for d in out.diagnostics] == [code]


@given(st.dictionaries(st.from_regex(r"[a-z]{1,6}", fullmatch=True), st.integers(), min_size=1))
def test_equal_trees_give_equal_bytes(values: dict[str, int]) -> None:
    inputs = {k: {"type": "t", "use_output": "default", "n": v} for k, v in values.items()}
    again = dict(reversed(list(inputs.items())))
    first = render_elastic({"outputs": OUT, "inputs": inputs}).content
    assert first is not None
    assert first == render_elastic({"outputs": OUT, "inputs": again}).content


@pytest.mark.parametrize(
    ("timeout", "ceiling", "seconds"),
    [
        ("5m", 300.0, 180.0),
        ("2m", 300.0, 60.0),
        ("1h", 300.0, 300.0),
        ("7m30s", 1000.0, 330.0),
        (None, 300.0, 300.0),
        ("5 minutes", 300.0, 300.0),
        ("5m", 2.0, 2.0),
        (2**70, 300.0, 300.0),
    ],
)
def test_the_long_poll_follows_fleet_server(
    timeout: object, ceiling: float, seconds: float
) -> None:
    assert poll_seconds(timeout, ceiling) == seconds


def _unit(state: str, unit: str = "u") -> Component:
    return Component("system/metrics-default", unit, "input", state, None, None)


@pytest.mark.parametrize(
    ("status", "units", "health"),
    [
        ("online", [_unit("HEALTHY")], "healthy"),
        ("online", [_unit("HEALTHY"), _unit("FAILED", "v")], "degraded"),
        ("degraded", [], "degraded"),
        ("online", [_unit("DEGRADED")], "degraded"),
        ("error", [_unit("HEALTHY")], "failed"),
        ("starting", [_unit("STARTING")], "healthy"),
    ],
)
def test_health_from_status_and_units(status: str, units: list[Component], health: str) -> None:
    assert checkin_health(status, units)[0] == health


def test_a_secret_is_a_reference_in_the_stored_policy() -> None:
    out = render_elastic(
        {
            "outputs": {"default": {"type": "elasticsearch", "api_key": "secret://K"}},
            "inputs": {"a": {"type": "x", "use_output": "default"}},
        }
    )
    assert out.content is not None, out.diagnostics
    assert out.secret_names == ["K"]
    paths: list[str] = []
    filled = fill(json.loads(out.content), {"K": "v"}, "", paths)
    assert filled["outputs"]["default"]["api_key"] == "v"
    assert paths == ["outputs.default.api_key"]
