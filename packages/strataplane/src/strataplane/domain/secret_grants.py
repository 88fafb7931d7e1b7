"""Who may receive a Secret's value (spec-format.md §3.4): its ``grant`` (a selector over host
labels plus optional ``agentKinds``) and ``minAssurance``, read from the Secret object at the
latest revision. A pure rule: the delivery endpoints and validation both ask it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from strataplane.domain.spec.diagnostics import SpecError
from strataplane.domain.spec.selectors import Selector, selector_from_json

__all__ = ["GRANT", "MIN_ASSURANCE", "SecretPolicy", "policy_of", "withheld"]

GRANT = "grant"
MIN_ASSURANCE = "assurance"
_RANK = {"low": 0, "high": 1}


@dataclass(frozen=True)
class SecretPolicy:
    name: str
    owner: str | None
    selector: Selector | None  # None: the grant does not parse, so it grants nothing
    agent_kinds: frozenset[str] | None  # None: every kind
    min_assurance: str = "low"


def policy_of(name: str, table: Mapping[str, object]) -> SecretPolicy:
    """The policy of a Secret object's table (as validated: bad parts grant nothing)."""
    owner = table.get("owner")
    grant = table.get("grant")
    selector: Selector | None = None
    kinds: frozenset[str] | None = None
    if isinstance(grant, Mapping):
        rest = {k: v for k, v in grant.items() if k != "agentKinds"}
        try:
            selector = selector_from_json(rest)
        except SpecError:
            selector = None
        raw = grant.get("agentKinds")
        if isinstance(raw, list):
            kinds = frozenset(k for k in raw if isinstance(k, str))
    minimum = table.get("minAssurance")
    return SecretPolicy(
        name,
        owner if isinstance(owner, str) else None,
        selector,
        kinds,
        minimum if minimum in _RANK else "low",
    )


def withheld(
    policy: SecretPolicy, kind: str, labels: Mapping[str, str], assurance: str
) -> str | None:
    """Why an agent may not receive the value (GRANT or MIN_ASSURANCE), None when it may."""
    if policy.selector is None or not policy.selector.matches(labels):
        return GRANT
    if policy.agent_kinds is not None and kind not in policy.agent_kinds:
        return GRANT
    if _RANK.get(assurance, 0) < _RANK[policy.min_assurance]:
        return MIN_ASSURANCE
    return None
