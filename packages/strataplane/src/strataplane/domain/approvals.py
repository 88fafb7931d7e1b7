"""Approval requirements of a change set and whether they are met (architecture.md §3.5,
spec-format.md §3.6).

Requirements come from the ApprovalPolicy objects of the base revision and Settings
``review.minimumApprovals``; rules apply by their ``when`` conditions over the changed files and
the impact set. Only each reviewer's latest review at the current digest counts; the author's
approval never counts; a team approval needs the team in ``acting_teams`` and current
membership; a standing reject blocks.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import cache
from typing import Literal

from strataplane.domain.spec.diagnostics import SpecError
from strataplane.domain.spec.selectors import selector_from_json

__all__ = [
    "ChangedFile",
    "Impact",
    "Requirements",
    "Review",
    "TeamRequirement",
    "evaluate",
    "glob_match",
    "latest_reviews",
    "minimum_approvals",
    "required_teams",
]


@dataclass(frozen=True, slots=True)
class ChangedFile:
    path: str
    kind: str
    owner_before: str | None  # None: the file is new
    owner_after: str | None  # None: the file is deleted


@dataclass(frozen=True, slots=True)
class Impact:
    agents: int
    host_labels: Sequence[Mapping[str, str]] = ()  # labels of each impacted agent's host


@dataclass(frozen=True, slots=True)
class Review:
    reviewer: str
    decision: Literal["approve", "reject", "comment"]
    digest: bytes
    acting_teams: frozenset[str]
    created_at: datetime
    id: str


@dataclass(frozen=True, slots=True)
class TeamRequirement:
    teams: tuple[str, ...]  # one team, or the alternatives of a mode "any" rule
    count: int
    rules: tuple[str, ...]  # "<policy>/<rule>"
    approvals: tuple[str, ...] = ()
    met: bool = False

    def to_json(self) -> dict[str, object]:
        who: dict[str, object] = (
            {"team": self.teams[0]} if len(self.teams) == 1 else {"anyOf": list(self.teams)}
        )
        return who | {
            "count": self.count,
            "rules": list(self.rules),
            "approvals": list(self.approvals),
            "met": self.met,
        }


@dataclass(frozen=True, slots=True)
class Requirements:
    minimum: int
    minimum_approvals: tuple[str, ...]
    teams: tuple[TeamRequirement, ...]
    rejected_by: tuple[str, ...]

    @property
    def minimum_met(self) -> bool:
        return len(self.minimum_approvals) >= self.minimum

    @property
    def approved(self) -> bool:
        met = self.minimum_met and all(t.met for t in self.teams)
        return met and not self.rejected_by

    def to_json(self) -> dict[str, object]:
        """The ``change_set.requirements`` document."""
        return {
            "minimumApprovals": {
                "count": self.minimum,
                "approvals": list(self.minimum_approvals),
                "met": self.minimum_met,
            },
            "teams": [t.to_json() for t in self.teams],
            "rejectedBy": list(self.rejected_by),
            "approved": self.approved,
        }


@cache
def _glob(pattern: str) -> re.Pattern[str]:
    parts = re.split(r"(\*\*|\*)", pattern)
    wild = {"**": ".*", "*": "[^/]*"}
    return re.compile("".join(wild.get(p, re.escape(p)) for p in parts))


def glob_match(pattern: str, path: str) -> bool:
    """``*`` matches within one path segment, ``**`` across segments."""
    return _glob(pattern).fullmatch(path) is not None


def minimum_approvals(settings: Mapping[str, object] | None) -> int:
    """Settings ``review.minimumApprovals`` of the base tree (default 1)."""
    review = (settings or {}).get("review")
    value = review.get("minimumApprovals", 1) if isinstance(review, Mapping) else 1
    return value if isinstance(value, int) and not isinstance(value, bool) else 1


def _strs(value: object) -> list[str]:
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


def _applies(when: object, changed: Sequence[ChangedFile], impact: Impact) -> bool:
    if not isinstance(when, Mapping):
        return True
    checks: dict[str, Callable[[object], bool]] = {
        "kinds": lambda v: any(f.kind in _strs(v) for f in changed),
        "paths": lambda v: any(glob_match(p, f.path) for p in _strs(v) for f in changed),
        "owners": lambda v: bool(
            set(_strs(v)) & {o for f in changed for o in (f.owner_before, f.owner_after)}
        ),
        "minImpactedAgents": lambda v: isinstance(v, int) and impact.agents >= v,
        "selector": lambda v: _some_host(v, impact),
    }
    return all(check(when[key]) for key, check in checks.items() if key in when)


def _some_host(raw: object, impact: Impact) -> bool:
    try:
        selector = selector_from_json(raw)
    except SpecError:
        return True  # a broken condition must not waive a review
    return any(selector.matches(labels) for labels in impact.host_labels)


def required_teams(
    policies: Mapping[str, Mapping[str, object]],
    changed: Sequence[ChangedFile],
    impact: Impact,
) -> list[TeamRequirement]:
    """The team requirements (unevaluated) of the ApprovalPolicies (by name) that apply."""
    owners = sorted({o for f in changed for o in (f.owner_before, f.owner_after) if o})
    host_owners = sorted({h["owner"] for h in impact.host_labels if h.get("owner")})
    merged: dict[tuple[str, ...], tuple[int, set[str]]] = {}
    for policy, value in sorted(policies.items()):
        rules = value.get("rules")
        for rule in rules if isinstance(rules, list) else []:
            if not isinstance(rule, Mapping) or not _applies(rule.get("when"), changed, impact):
                continue
            teams: list[str] = []
            for t in _strs(rule.get("teams")):
                teams += owners if t == "@owners" else host_owners if t == "@hostOwners" else [t]
            count = rule.get("count", 1)
            count = count if isinstance(count, int) else 1
            mode_any = rule.get("mode") == "any"
            groups = [tuple(sorted(set(teams)))] if mode_any else [(t,) for t in set(teams)]
            for group in groups:
                if group:
                    before, names = merged.get(group, (0, set()))
                    merged[group] = (max(before, count), names | {f"{policy}/{rule.get('name')}"})
    ordered = sorted(merged.items(), key=lambda kv: (len(kv[0]) > 1, kv[0]))
    return [TeamRequirement(group, c, tuple(sorted(names))) for group, (c, names) in ordered]


def latest_reviews(reviews: Iterable[Review], digest: bytes) -> dict[str, Review]:
    """Each reviewer's newest review at ``digest`` (by ``created_at``, then ``id``)."""
    latest: dict[str, Review] = {}
    for r in sorted(reviews, key=lambda r: (r.created_at, r.id)):
        if r.digest == digest:
            latest[r.reviewer] = r
    return latest


def evaluate(
    policies: Mapping[str, Mapping[str, object]],
    minimum: int,
    changed: Sequence[ChangedFile],
    impact: Impact,
    reviews: Iterable[Review],
    *,
    digest: bytes,
    author: str,
    team_members: Mapping[str, Iterable[str]],
    eligible: Callable[[str], bool] = lambda reviewer: True,
) -> Requirements:
    """Compute the requirements and the approvals that meet them.

    ``team_members`` is current membership by team slug; ``eligible`` says whether a reviewer
    holds ``approver`` or ``admin`` with a scope that intersects the change set.
    """
    latest = latest_reviews(reviews, digest)
    approvers = {
        r.reviewer: r.acting_teams
        for r in latest.values()
        if r.decision == "approve" and r.reviewer != author and eligible(r.reviewer)
    }
    members = {team: set(users) for team, users in team_members.items()}

    def approvals_for(team: str) -> set[str]:
        return {
            u for u, acting in approvers.items() if team in acting and u in members.get(team, ())
        }

    teams = []
    for req in required_teams(policies, changed, impact):
        per_team = [approvals_for(t) for t in req.teams]
        met = any(len(a) >= req.count for a in per_team)
        approved = tuple(sorted(set().union(*per_team)))
        teams.append(TeamRequirement(req.teams, req.count, req.rules, approved, met))
    rejected = sorted(r.reviewer for r in latest.values() if r.decision == "reject")
    return Requirements(minimum, tuple(sorted(approvers)), tuple(teams), tuple(rejected))
