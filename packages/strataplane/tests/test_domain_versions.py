"""agentVersions: the table of spec-format.md §2.4, SemVer order, and the two rejections."""

from __future__ import annotations

import pytest
from strataplane.domain.spec.versions import RequirementError, parse_requirement, parse_version

TABLE = [
    # requirement, matching versions, non-matching versions
    ("1.37.2", ["1.37.2", "1.37.2+build.5"], ["1.37.3", "1.37.1", "1.37.2-rc.1"]),
    ("=1.37.2", ["1.37.2"], ["1.37.3"]),
    (
        "1.37",
        ["1.37.0", "1.37.99", "1.37.5-rc.1"],
        ["1.36.9", "1.38.0", "1.38.0-rc.1", "1.37.0-rc.1"],
    ),
    ("=1", ["1.0.0", "1.99.0"], ["2.0.0", "0.9.9", "2.0.0-alpha"]),
    (">=1.37", ["1.37.0", "2.5.0"], ["1.36.9", "1.37.0-rc.1"]),
    (">1.37", ["1.38.0", "1.38.0-rc.1"], ["1.37.9"]),
    (">1.37.2", ["1.37.3", "1.37.3-rc.1"], ["1.37.2"]),
    ("<2", ["1.99.99", "2.0.0-rc.1"], ["2.0.0"]),
    ("<=1.37", ["1.37.9", "1.0.0"], ["1.38.0", "1.38.0-rc.1"]),
    ("<=1.37.2", ["1.37.2"], ["1.37.3-rc.1"]),
    ("~1.37.2", ["1.37.2", "1.37.9"], ["1.37.1", "1.38.0"]),
    ("~1.37", ["1.37.0", "1.37.9"], ["1.38.0", "1.38.0-rc.1", "1.37.0-rc.1"]),
    (">=2", ["2.0.0", "3.0.0-rc.1"], ["2.0.0-rc.1"]),
    ("~1", ["1.0.0", "1.9.0"], ["2.0.0"]),
    ("^1.37", ["1.37.0", "1.99.0"], ["2.0.0", "1.36.0"]),
    ("^0.57", ["0.57.0", "0.57.9"], ["0.58.0", "0.56.0"]),
    ("^0.0.3", ["0.0.3"], ["0.0.4", "0.0.2"]),
    ("^0.0", ["0.0.9"], ["0.1.0"]),
    ("^0", ["0.9.9"], ["1.0.0"]),
    ("*", ["0.0.0", "99.0.0-rc.1"], []),
    (">=1.37, <2", ["1.37.0", "1.40.1"], ["2.0.0", "1.36.0"]),
    ("  >= 1.37 ,< 2 ", ["1.40.1"], ["2.1.0"]),
    ("^8.15", ["8.15.0", "8.17.2"], ["9.0.0", "8.14.0"]),
    ("~0.57", ["0.57.1"], ["0.58.0"]),
    ("=1.40.0-rc.1", ["1.40.0-rc.1"], ["1.40.0", "1.40.0-rc.2"]),
    (">=1.40.0-rc.1", ["1.40.0-rc.2", "1.40.0"], ["1.40.0-beta"]),
]


@pytest.mark.parametrize(("text", "good", "bad"), TABLE)
def test_requirement_table(text: str, good: list[str], bad: list[str]) -> None:
    req = parse_requirement(text)
    assert req.satisfiable
    assert [v for v in good if not req.matches(v)] == []
    assert [v for v in bad if req.matches(v)] == []


def test_unknown_version_matches_no_requirement() -> None:
    assert not parse_requirement("*").matches(None)
    assert not parse_requirement(">=1").matches("not-a-version")


@pytest.mark.parametrize(
    "text",
    [
        "",
        " ",
        "1.2.3.4",
        ">= ",
        "=>1",
        "01.2",
        "1.02",
        "v1.2",
        "1.x",
        "*, >1",
        "1,",
        "~>1",
        "1.2-rc.1",
        "1.2.3-",
        "1.2.3-01",
        "1.2.3+build",
        "> =1",
        "1 2",
    ],
)
def test_syntax_errors(text: str) -> None:
    with pytest.raises(RequirementError):
        parse_requirement(text)


@pytest.mark.parametrize(
    ("text", "satisfiable"),
    [
        (">=2, <1", False),
        (">1.0.0, <1.0.1", True),
        (">1.0.0, <1.0.1-0", False),
        (">=1.0.0, <=1.0.0", True),
        ("1.37, 1.38", False),
        ("<0.0.0", True),
        ("<0.0.0-0", False),
        ("^1, >=1.99.99", True),
        (">1.0.0, <=1.0.0", False),
    ],
)
def test_unsatisfiable(text: str, satisfiable: bool) -> None:
    assert parse_requirement(text).satisfiable is satisfiable


def test_semver_order() -> None:
    ordered = [
        "1.0.0-alpha",
        "1.0.0-alpha.1",
        "1.0.0-alpha.beta",
        "1.0.0-beta",
        "1.0.0-beta.2",
        "1.0.0-beta.11",
        "1.0.0-rc.1",
        "1.0.0",
        "1.0.1",
        "1.1.0",
        "2.0.0",
    ]
    versions = [parse_version(v) for v in ordered]
    shuffled = [versions[i] for i in (5, 0, 10, 3, 8, 1, 9, 2, 7, 4, 6)]
    assert sorted(shuffled) == versions
    assert parse_version("1.0.0+a") == parse_version("1.0.0+b")
