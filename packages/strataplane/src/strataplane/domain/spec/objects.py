"""What the cross-file checks need to know about one checked file: ``Facts``.

A kind check fills in the facts of its file as it reads the fields; only values that passed
their own checks are recorded, so a broken field yields one diagnostic, not a cascade.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from strataplane.domain.spec.agentconfig import Reference
from strataplane.domain.spec.fields import parse_duration
from strataplane.domain.spec.paths import ObjectId
from strataplane.domain.spec.versions import Requirement

__all__ = ["PARAM_TYPES", "Facts", "Inclusion", "NameRef", "ParamDecl", "param_value_ok"]

PARAM_TYPES = ("string", "integer", "float", "boolean", "duration", "string-array")


def param_value_ok(param_type: str, value: object) -> bool:
    """Whether ``value`` has exactly the declared parameter type."""
    match param_type:
        case "string":
            return isinstance(value, str)
        case "integer":
            return isinstance(value, int) and not isinstance(value, bool)
        case "float":
            return isinstance(value, float)
        case "boolean":
            return isinstance(value, bool)
        case "duration":
            return isinstance(value, str) and parse_duration(value) is not None
        case "string-array":
            return isinstance(value, list) and all(isinstance(v, str) for v in value)
    return False


@dataclass(frozen=True, slots=True)
class ParamDecl:
    type: str
    has_default: bool
    default: object = None


@dataclass(frozen=True, slots=True)
class Inclusion:
    """A Layer's ``bundles[i]`` entry."""

    name: str
    params: Mapping[str, object]
    pointer: str


@dataclass(frozen=True, slots=True)
class NameRef:
    """A by-name reference to another object (or team), checked against the whole tree."""

    kind: str  # "Bundle", "Route", "RolloutPolicy", "Journey" or "team"
    name: str
    pointer: str


@dataclass
class Facts:
    id: ObjectId
    owner: str | None = None
    agent_kind: str | None = None
    agent_versions: Requirement | None = None
    inclusions: list[Inclusion] = field(default_factory=list)
    names: list[NameRef] = field(default_factory=list)
    references: list[Reference] = field(default_factory=list)
    params: dict[str, ParamDecl] = field(default_factory=dict)
    placement_key: str | None = None
    placement_uses: list[tuple[str, str]] = field(default_factory=list)  # (label key, pointer)
    default_model: str | None = None
