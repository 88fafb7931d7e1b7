"""Path conventions: every kind's path, and SP-1001 / SP-1002 for the rest."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from strataplane.domain.spec.diagnostics import Diagnostic
from strataplane.domain.spec.paths import KINDS, ObjectId, parse_path, path_for


@pytest.mark.parametrize(
    ("path", "kind", "name"),
    [
        ("layers/linux-prod.toml", "Layer", "linux-prod"),
        ("bundles/linux-system.toml", "Bundle", "linux-system"),
        ("routes/influx.prod.toml", "Route", "influx.prod"),
        ("secrets/PORTAL_PASSWORD.toml", "Secret", "PORTAL_PASSWORD"),
        ("journeys/portal-login.toml", "Journey", "portal-login"),
        ("policies/approval/default.toml", "ApprovalPolicy", "default"),
        ("policies/rollout/standard.toml", "RolloutPolicy", "standard"),
        ("settings.toml", "Settings", "settings"),
        ("placements/journey-runners.toml", "Placement", "journey-runners"),
        ("layers/" + "a" * 253 + ".toml", "Layer", "a" * 253),
        ("secrets/" + "A" * 128 + ".toml", "Secret", "A" * 128),
    ],
)
def test_paths_name_kind_and_name(path: str, kind: str, name: str) -> None:
    assert parse_path(path) == ObjectId(kind, name, path)  # type: ignore[arg-type]
    assert path_for(kind, name) == path  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("path", "code"),
    [
        ("layers/a/b.toml", "SP-1001"),
        ("Layers/a.toml", "SP-1001"),
        ("policies/a.toml", "SP-1001"),
        ("policies/approval/x/y.toml", "SP-1001"),
        ("settings/x.toml", "SP-1001"),
        ("layers/a.yaml", "SP-1001"),
        ("layers/a.toml/", "SP-1001"),
        ("/layers/a.toml", "SP-1001"),
        ("README.md", "SP-1001"),
        ("layers/Base.toml", "SP-1002"),
        ("layers/-a.toml", "SP-1002"),
        ("layers/a-.toml", "SP-1002"),
        ("layers/.toml", "SP-1002"),
        ("layers/a_b.toml", "SP-1002"),
        ("layers/" + "a" * 254 + ".toml", "SP-1002"),
        ("secrets/A-B.toml", "SP-1002"),
        ("secrets/" + "A" * 129 + ".toml", "SP-1002"),
        ("journeys/é.toml", "SP-1002"),
    ],
)
def test_bad_paths(path: str, code: str) -> None:
    found = parse_path(path)
    assert isinstance(found, Diagnostic)
    assert (found.code, found.path) == (code, path)


@given(
    st.sampled_from(KINDS), st.from_regex(r"[a-z0-9]([a-z0-9.-]{0,20}[a-z0-9])?", fullmatch=True)
)
def test_path_for_inverts_parse_path(kind: str, name: str) -> None:
    name = {"Settings": "settings", "Secret": name.replace(".", "_").replace("-", "_")}.get(
        kind, name
    )
    path = path_for(kind, name)  # type: ignore[arg-type]
    assert parse_path(path) == ObjectId(kind, name, path)  # type: ignore[arg-type]
