"""The pure rules of policies: which versions are in force, validation against the schema,
and decisions that name the policy behind them (docs/agentbus/policies.md)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from agentbus.policies import domain
from agentbus.policies.model import DEFAULT_CEDAR, SEND
from hypothesis import given
from hypothesis import strategies as st

WS = uuid.UUID(int=7)


def _agent(n: int, capabilities: list[str] | None = None) -> dict[str, Any]:
    return {"id": uuid.UUID(int=n), "workspace_id": WS, "owner_user_id": uuid.UUID(int=99),
            "name": f"a{n}", "address": f"agent://acme/main/a{n}", "harness": "claude",
            "capabilities": [{"name": c} for c in capabilities or []]}  # fmt: skip


def _row(name: str, cedar: str, version: int = 1, enabled: bool = True) -> dict[str, Any]:
    return {"id": uuid.uuid4(), "workspace_id": None, "name": name, "version": version,
            "cedar": cedar, "enabled": enabled}  # fmt: skip


def _request(at: datetime, size: int = 10, action: str = SEND) -> domain.Request:
    return domain.Request(action=action, principal=_agent(1), resource=_agent(2, ["x"]),
                          type="agentbus.message.v1", capability=None, size_bytes=size,
                          attachments=0, attachment_bytes=0, priority="normal", at=at)  # fmt: skip


_versions = st.dictionaries(st.tuples(st.sampled_from("abc"), st.integers(1, 5)), st.booleans())


@given(_versions)
def test_the_newest_version_of_each_name_runs_if_enabled(
    versions: dict[tuple[str, int], bool],
) -> None:
    rows = [_row(name, DEFAULT_CEDAR, version, on) for (name, version), on in versions.items()]
    running = {r["name"]: r["version"] for r in domain.in_force(rows)}
    for name in {name for name, _version in versions}:
        newest = max(version for n, version in versions if n == name)
        assert (name in running) == versions[(name, newest)]
        assert running.get(name, newest) == newest


@given(st.integers(0, 23), st.integers(0, 6))
def test_a_time_window_decides_by_the_utc_hour(hour: int, days: int) -> None:
    office = _row(
        "office-hours",
        "permit(principal, action, resource)\n"
        "  when { context.hour >= 8 && context.hour < 18 && context.weekday <= 5 };",
    )
    compiled = domain.compile_set([office])
    at = datetime(2026, 12, 7, hour, tzinfo=UTC) + timedelta(days=days)  # a Monday + days
    decision = domain.decide(compiled, _request(at))
    assert decision.allowed == (8 <= hour < 18 and at.isoweekday() <= 5)
    if decision.allowed:
        assert decision.policy_name == "office-hours"


@given(st.integers(0, 10_000))
def test_a_forbid_beside_the_default_denies_and_is_named(size: int) -> None:
    cap = _row("cap", "forbid(principal, action, resource) when { context.size_bytes > 4096 };")
    compiled = domain.compile_set([_row("default", DEFAULT_CEDAR), cap])
    decision = domain.decide(compiled, _request(datetime.now(UTC), size))
    assert decision.allowed == (size <= 4096)
    if not decision.allowed:
        assert (decision.policy_id, decision.policy_name) == (cap["id"], "cap")


def test_the_default_alone_allows_without_asking_cedar() -> None:
    compiled = domain.compile_set([_row("default", DEFAULT_CEDAR)])
    assert compiled.allows_all
    assert compiled.policies is None
    assert domain.decide(compiled, _request(datetime.now(UTC))).allowed
    assert not domain.decide(domain.compile_set([]), _request(datetime.now(UTC))).allowed


@pytest.mark.parametrize(
    "text",
    [
        "permit(principal, action, resource) when { context.nope == 1 };",
        'permit(principal, action == AgentBus::Action::"fly", resource);',
        "permit(principal == ?principal, action, resource);",
        "",
        "x" * (domain.CEDAR_MAX + 1),
        "permit(principal, action, resource) when { principal.address == 3 };",
    ],
)
def test_text_that_fails_the_schema_is_invalid(text: str) -> None:
    with pytest.raises(domain.PolicyInvalid) as raised:
        domain.validate(text)
    assert raised.value.errors


def test_capabilities_and_workspaces_are_in_the_entities() -> None:
    cedar = ('permit(principal in AgentBus::Workspace::"ws_00000000000000000000000000000007",'
             ' action, resource) when { resource.capabilities.contains("x") };')  # fmt: skip
    domain.validate(cedar)
    assert domain.decide(
        domain.compile_set([_row("p", cedar)]), _request(datetime.now(UTC))
    ).allowed
