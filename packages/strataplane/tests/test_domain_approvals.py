"""Approval requirements: rules and conditions, token expansion, and how reviews count."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from strataplane.domain.approvals import (
    ChangedFile,
    Impact,
    Review,
    evaluate,
    glob_match,
    minimum_approvals,
    required_teams,
)
from strataplane.domain.spec.canonical import parse

DIGEST, OLD = b"\x01" * 32, b"\x02" * 32
T0 = datetime(2025, 6, 1, tzinfo=UTC)
POLICY = parse(b"""
owner = "platform"
[[rules]]
name = "owners"
teams = ["@owners"]
[[rules]]
name = "production"
teams = ["sre"]
when = { minImpactedAgents = 1, selector = { matchLabels = { env = "prod" } } }
[[rules]]
name = "destinations"
teams = ["sre", "observability"]
mode = "any"
when = { kinds = ["Route"] }
[[rules]]
name = "big"
teams = ["sre"]
count = 2
when = { minImpactedAgents = 1000 }
[[rules]]
name = "hosts"
teams = ["@hostOwners"]
when = { paths = ["layers/*.toml"], owners = ["web"] }
""")
POLICIES = {"default": POLICY}
MEMBERS = {"web": {"wendy", "walt"}, "sre": {"sam", "sue", "wendy"}, "observability": {"olga"}}
ROUTE = [ChangedFile("routes/influx.toml", "Route", "observability", "observability")]
LAYER = [ChangedFile("layers/web.toml", "Layer", "web", "web")]
PROD = Impact(
    3, [{"env": "prod", "owner": "shop"}, {"env": "prod"}, {"env": "dev", "owner": "web"}]
)

_seq = iter(range(10_000))


def review(
    who: str,
    decision: str = "approve",
    teams: tuple[str, ...] = (),
    *,
    digest: bytes = DIGEST,
    minutes: int | None = None,
) -> Review:
    n = next(_seq)
    at = T0 + timedelta(minutes=n if minutes is None else minutes)
    return Review(who, decision, digest, frozenset(teams), at, f"{n:08d}")  # type: ignore[arg-type]


def run(
    changed: list[ChangedFile], impact: Impact, reviews: list[Review], **kw: Any
) -> dict[str, Any]:
    result = evaluate(
        POLICIES,
        kw.pop("minimum", 1),
        changed,
        impact,
        reviews,
        digest=DIGEST,
        author=kw.pop("author", "alice"),
        team_members=MEMBERS,
        **kw,
    )
    return result.to_json()


def test_rules_apply_by_their_conditions() -> None:
    def teams(
        changed: list[ChangedFile], impact: Impact
    ) -> list[tuple[tuple[str, ...], int, tuple[str, ...]]]:
        return [(r.teams, r.count, r.rules) for r in required_teams(POLICIES, changed, impact)]

    assert teams(ROUTE, Impact(0)) == [
        (("observability",), 1, ("default/owners",)),
        (("observability", "sre"), 1, ("default/destinations",)),
    ]
    assert teams(LAYER, PROD) == [
        (("shop",), 1, ("default/hosts",)),
        (("sre",), 1, ("default/production",)),
        (("web",), 1, ("default/hosts", "default/owners")),
    ]
    # the same team required by two rules: the larger count, once
    assert teams(LAYER, Impact(1000, [{"env": "prod"}]))[0] == (
        ("sre",),
        2,
        ("default/big", "default/production"),
    )
    moved = [ChangedFile("layers/web.toml", "Layer", "web", "shop")]
    assert [r.teams for r in required_teams(POLICIES, moved, Impact(0))] == [("shop",), ("web",)]


def test_documented_shape_and_approval() -> None:
    reviews = [review("olga", teams=("observability",)), review("sam", teams=("sre",))]
    out = run(ROUTE, Impact(0), reviews)
    assert out == {
        "minimumApprovals": {"count": 1, "approvals": ["olga", "sam"], "met": True},
        "teams": [
            {
                "team": "observability",
                "count": 1,
                "rules": ["default/owners"],
                "approvals": ["olga"],
                "met": True,
            },
            {
                "anyOf": ["observability", "sre"],
                "count": 1,
                "rules": ["default/destinations"],
                "approvals": ["olga", "sam"],
                "met": True,
            },
        ],
        "rejectedBy": [],
        "approved": True,
    }


def test_the_authors_approval_never_counts() -> None:
    out = run(ROUTE, Impact(0), [review("olga", teams=("observability",))], author="olga")
    assert out["minimumApprovals"]["approvals"] == []
    assert not out["approved"]


def test_a_reject_blocks_until_replaced() -> None:
    approvals = [review("olga", teams=("observability",)), review("sam", "reject")]
    out = run(ROUTE, Impact(0), approvals)
    assert out["rejectedBy"] == ["sam"]
    assert not out["approved"]
    out = run(ROUTE, Impact(0), [*approvals, review("sam", "comment")])
    assert out["rejectedBy"] == []
    assert out["approved"]


def test_the_latest_review_counts_and_a_comment_withdraws() -> None:
    first = review("olga", teams=("observability",), minutes=1)
    later = review("olga", "comment", minutes=2)
    assert not run(ROUTE, Impact(0), [later, first])["approved"]  # order of input is irrelevant
    again = review("olga", teams=("observability",), minutes=3)
    assert run(ROUTE, Impact(0), [first, later, again])["approved"]
    tie_a = review("olga", "reject", minutes=9)
    tie_b = review("olga", teams=("observability",), minutes=9)  # same time, larger id wins
    assert run(ROUTE, Impact(0), [tie_b, tie_a])["approved"]


def test_reviews_of_another_digest_are_ignored() -> None:
    stale = [
        review("olga", teams=("observability",), digest=OLD),
        review("sam", "reject", digest=OLD),
    ]
    out = run(ROUTE, Impact(0), stale)
    assert out["minimumApprovals"]["approvals"] == []
    assert out["rejectedBy"] == []
    # a stale approval does not shadow a current one, and vice versa
    out = run(
        ROUTE,
        Impact(0),
        [review("olga", teams=("observability",)), review("olga", "reject", digest=OLD)],
    )
    assert out["approved"]


def test_team_approval_needs_acting_team_and_current_membership() -> None:
    out = run(LAYER, Impact(0), [review("wendy", teams=("sre",))])
    assert out["teams"][0]["approvals"] == []
    assert not out["approved"]
    out = run(LAYER, Impact(0), [review("olga", teams=("web",))])
    assert out["teams"][0]["approvals"] == []  # not a member of web
    assert run(LAYER, Impact(0), [review("wendy", teams=("web", "sre"))])["approved"]


def test_count_needs_distinct_reviewers() -> None:
    big = Impact(1000, [{"env": "dev"}])
    one = [
        review("sam", teams=("sre",)),
        review("sam", teams=("sre",)),
        review("walt", teams=("web",)),
    ]

    def sre(out: dict[str, Any]) -> dict[str, Any]:
        return next(t for t in out["teams"] if t.get("team") == "sre")

    assert not sre(run(LAYER, big, one))["met"]
    assert sre(run(LAYER, big, [*one, review("sue", teams=("sre",))]))["met"]


def test_minimum_and_eligibility() -> None:
    reviews = [review("olga", teams=("observability",))]
    assert not run(ROUTE, Impact(0), reviews, minimum=2)["approved"]
    assert run(ROUTE, Impact(0), [*reviews, review("x")], minimum=2)["approved"]
    assert not run(ROUTE, Impact(0), reviews, eligible=lambda who: who != "olga")["approved"]
    assert run([], Impact(0), [], minimum=0)["approved"]
    assert not run([], Impact(0), [], minimum=1)["approved"]


def test_minimum_approvals_from_settings() -> None:
    assert minimum_approvals(None) == 1
    assert minimum_approvals({"review": {"minimumApprovals": 0}}) == 0
    assert minimum_approvals({"owner": "x"}) == 1


@pytest.mark.parametrize(
    ("pattern", "path", "matches"),
    [
        ("layers/*.toml", "layers/a.toml", True),
        ("layers/*", "layers/a.toml", True),
        ("*.toml", "layers/a.toml", False),
        ("**.toml", "layers/a.toml", True),
        ("policies/**", "policies/approval/a.toml", True),
        ("policies/*", "policies/approval/a.toml", False),
        ("settings.toml", "settings.toml", True),
        ("layers/a.toml", "layers/aXtoml", False),
    ],
)
def test_glob(pattern: str, path: str, matches: bool) -> None:
    assert glob_match(pattern, path) is matches
