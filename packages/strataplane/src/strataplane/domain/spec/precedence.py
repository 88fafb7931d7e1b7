"""Which Layers (and Journeys) apply to an agent, in merge order (spec-format.md §4.1, §4.2).

A Layer applies when its ``agentKind`` is the agent's kind, its ``agentVersions`` is absent or
satisfied (an unknown version satisfies no requirement), and its selector matches the host's
labels. Applying Layers merge by ``precedence`` ascending, then path ascending by bytes: a
later Layer wins.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from strataplane.domain.spec.paths import ObjectId, parse_path
from strataplane.domain.spec.selectors import EMPTY, Selector, selector_from_json
from strataplane.domain.spec.versions import Requirement, parse_requirement

__all__ = ["LayerRef", "applicable_journeys", "applicable_layers", "layers_of"]


@dataclass(frozen=True, slots=True)
class LayerRef:
    """The fields of a (validated) Layer that decide where and when it applies."""

    path: str
    agent_kind: str
    agent_versions: Requirement | None
    precedence: int
    selector: Selector

    @classmethod
    def from_value(cls, path: str, value: Mapping[str, object]) -> LayerRef:
        versions = value.get("agentVersions")
        precedence = value.get("precedence", 0)
        if not isinstance(precedence, int):
            raise ValueError(f"{path}: precedence is not an integer")
        return cls(
            path=path,
            agent_kind=str(value.get("agentKind")),
            agent_versions=parse_requirement(versions) if isinstance(versions, str) else None,
            precedence=precedence,
            selector=_selector(value.get("selector")),
        )

    def applies(self, agent_kind: str, version: str | None, labels: Mapping[str, str]) -> bool:
        if self.agent_kind != agent_kind:
            return False
        if self.agent_versions is not None and not self.agent_versions.matches(version):
            return False
        return self.selector.matches(labels)

    @property
    def order(self) -> tuple[int, bytes]:
        return (self.precedence, self.path.encode("utf-8"))


def _selector(raw: object) -> Selector:
    return EMPTY if raw is None else selector_from_json(raw)


def _of_kind(objects: Mapping[str, Mapping[str, object]], kind: str) -> list[tuple[str, ObjectId]]:
    found = []
    for path in objects:
        oid = parse_path(path)
        if isinstance(oid, ObjectId) and oid.kind == kind:
            found.append((path, oid))
    return found


def layers_of(objects: Mapping[str, Mapping[str, object]]) -> list[LayerRef]:
    """Every Layer of a parsed tree (path -> value), in merge order."""
    layers = [LayerRef.from_value(p, objects[p]) for p, _ in _of_kind(objects, "Layer")]
    return sorted(layers, key=lambda layer: layer.order)


def applicable_layers(
    layers: list[LayerRef], agent_kind: str, version: str | None, labels: Mapping[str, str]
) -> list[LayerRef]:
    """The Layers that apply to one agent, in merge order (the last one wins)."""
    chosen = [layer for layer in layers if layer.applies(agent_kind, version, labels)]
    return sorted(chosen, key=lambda layer: layer.order)


def applicable_journeys(
    objects: Mapping[str, Mapping[str, object]], labels: Mapping[str, str]
) -> list[str]:
    """Paths of the Journeys whose selector matches a runner's host, by path.

    ``enabled = false`` Journeys are included; the scheduler decides what runs.
    """
    found = []
    for path, _ in _of_kind(objects, "Journey"):
        if _selector(objects[path].get("selector")).matches(labels):
            found.append(path)
    return sorted(found, key=lambda p: p.encode("utf-8"))
