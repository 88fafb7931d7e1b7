"""Paths of the spec tree (spec-format.md §1.1, §1.2): the path alone gives kind and name.

``parse_path`` maps a path to its ``ObjectId`` or a diagnostic: SP-1001 when the path fits no
convention, SP-1002 when it fits one but the name breaks its kind's rule. ``path_for`` is the
inverse.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from strataplane.domain.spec.diagnostics import Diagnostic

__all__ = [
    "KINDS",
    "SETTINGS_PATH",
    "Kind",
    "ObjectId",
    "kind_of",
    "name_ok",
    "parse_path",
    "path_for",
]

type Kind = Literal[
    "Layer",
    "Bundle",
    "Route",
    "Secret",
    "Journey",
    "ApprovalPolicy",
    "RolloutPolicy",
    "Settings",
    "Placement",
]

KINDS: tuple[Kind, ...] = (
    "Layer",
    "Bundle",
    "Route",
    "Secret",
    "Journey",
    "ApprovalPolicy",
    "RolloutPolicy",
    "Settings",
    "Placement",
)

_DIRS: dict[str, Kind] = {
    "layers": "Layer",
    "bundles": "Bundle",
    "routes": "Route",
    "secrets": "Secret",
    "journeys": "Journey",
    "policies/approval": "ApprovalPolicy",
    "policies/rollout": "RolloutPolicy",
    "placements": "Placement",
}
_KIND_DIRS = {kind: directory for directory, kind in _DIRS.items()}
_NAME = re.compile(r"[a-z0-9]([a-z0-9.-]{0,251}[a-z0-9])?")
_SECRET_NAME = re.compile(r"[A-Za-z0-9_]{1,128}")
_SHAPE = re.compile(r"(?P<dir>policies/approval|policies/rollout|[^/]+)/(?P<file>[^/]*)\.toml")
SETTINGS_PATH = "settings.toml"


@dataclass(frozen=True, slots=True, order=True)
class ObjectId:
    """What a path names: the object's kind and name, and the path itself."""

    kind: Kind
    name: str
    path: str


def name_ok(kind: Kind, name: str) -> bool:
    """The name rule of ``kind`` (the CHECK on ``spec_object.name``, with 128 for Secrets)."""
    if kind == "Settings":
        return name == "settings"
    pattern = _SECRET_NAME if kind == "Secret" else _NAME
    return pattern.fullmatch(name) is not None


def parse_path(path: str) -> ObjectId | Diagnostic:
    """The kind and name of ``path``, or SP-1001 / SP-1002 naming the path."""
    if path == SETTINGS_PATH:
        return ObjectId("Settings", "settings", path)
    shape = _SHAPE.fullmatch(path)
    kind = _DIRS.get(shape.group("dir")) if shape else None
    if shape is None or kind is None:
        return Diagnostic("SP-1001", path, None, f"{path!r} fits no path convention of the spec")
    name = shape.group("file")
    if not name_ok(kind, name):
        rule = (
            "1 to 128 characters of letters, digits and _"
            if kind == "Secret"
            else "1 to 253 characters of a-z, 0-9, '.' and '-', starting and ending with a-z or 0-9"
        )
        return Diagnostic("SP-1002", path, None, f"{kind} name {name!r} breaks the rule: {rule}")
    return ObjectId(kind, name, path)


def kind_of(path: str) -> Kind | None:
    """The kind of a valid path, None for an invalid one."""
    parsed = parse_path(path)
    return parsed.kind if isinstance(parsed, ObjectId) else None


def path_for(kind: Kind, name: str) -> str:
    """The path of object ``name`` of ``kind``; ValueError when the name breaks its rule."""
    if not name_ok(kind, name):
        raise ValueError(f"invalid {kind} name {name!r}")
    if kind == "Settings":
        return SETTINGS_PATH
    return f"{_KIND_DIRS[kind]}/{name}.toml"
