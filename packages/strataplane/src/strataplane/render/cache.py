"""The render cache: one render per distinct render input, however many agents share it.

An agent's composition depends on its labels and version only through the Layers that apply
(spec-format.md §4.1), so the key is (tenant, tree hash, agent kind, applying Layer paths,
the version-dependent renderer choices, agent URL): 100,000 agents over 50 label sets render at
most 50 times per tree. Artifacts are per tenant, so the tenant is part of the key.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from uuid import UUID

from strataplane.domain.spec.compose import Composition, compose
from strataplane.domain.spec.diagnostics import Diagnostic, has_errors
from strataplane.domain.spec.precedence import applicable_layers
from strataplane.domain.spec.versions import parse_version
from strataplane.render.artifacts import Artifact, make_artifact
from strataplane.render.elastic import render_elastic
from strataplane.render.telegraf import render_choices, render_telegraf
from strataplane.render.trees import SpecTree
from strataplane.render.vector import render_vector

__all__ = ["RENDERED_KINDS", "RenderCache", "RenderResult", "supported_version"]

RENDERED_KINDS = ("telegraf", "vector", "elastic-agent")  # the kinds this server renders

_MIN_TELEGRAF = parse_version("1.37.0")  # outputs.heartbeat


@lru_cache(maxsize=1024)
def supported_version(kind: str, version: str | None) -> bool:
    """Telegraf from 1.37 (outputs.heartbeat); an unknown version is rendered as such."""
    if kind != "telegraf" or version is None:
        return True
    try:
        return not parse_version(version) < _MIN_TELEGRAF
    except ValueError:
        return False


@dataclass(frozen=True)
class RenderResult:
    layers: tuple[str, ...]
    artifact: Artifact | None
    diagnostics: tuple[Diagnostic, ...] = field(default=())

    @property
    def ok(self) -> bool:
        return self.artifact is not None


type Key = tuple[UUID, bytes, str, tuple[str, ...], str, str]
type Choice = tuple[bytes, str, str | None, tuple[str | None, ...]]  # tree, kind, version, labels


class RenderCache:
    """Process-wide LRU of render results; ``renders`` counts the real renders done."""

    def __init__(self, max_entries: int = 8192) -> None:
        self._entries: OrderedDict[Key, RenderResult] = OrderedDict()
        self._max = max_entries
        self._choices: dict[Choice, tuple[str, ...]] = {}
        self.renders = 0
        self.hits = 0

    def render(
        self,
        tenant_id: UUID,
        tree: SpecTree,
        kind: str,
        version: str | None,
        labels: Mapping[str, str],
        agent_url: str,
    ) -> RenderResult:
        chosen = self._chosen(tree, kind, version, labels)
        choices = render_choices(version) if kind == "telegraf" else ""
        key: Key = (tenant_id, tree.hash, kind, chosen, choices, agent_url)
        found = self._entries.get(key)
        if found is not None:
            self.hits += 1
            self._entries.move_to_end(key)
            return found
        result = self._render(tree, kind, version, labels, agent_url, chosen)
        self.renders += 1
        self._entries[key] = result
        while len(self._entries) > self._max:
            self._entries.popitem(last=False)
        return result

    def _chosen(
        self, tree: SpecTree, kind: str, version: str | None, labels: Mapping[str, str]
    ) -> tuple[str, ...]:
        """The paths of the applying Layers, found once per distinct value of the labels the
        selectors read (agents differ in ``host.name``, which selectors rarely read)."""
        key: Choice = (tree.hash, kind, version, tuple(labels.get(k) for k in tree.selector_keys))
        found = self._choices.get(key)
        if found is None:
            applying = applicable_layers(tree.layers, kind, version, labels)
            found = tuple(layer.path for layer in applying)
            if len(self._choices) >= 8 * self._max:
                self._choices.clear()
            self._choices[key] = found
        return found

    @staticmethod
    def compose(
        tree: SpecTree, kind: str, version: str | None, labels: Mapping[str, str]
    ) -> Composition:
        return compose(tree.objects, kind, version, labels, layers=tree.layers)

    def _render(
        self,
        tree: SpecTree,
        kind: str,
        version: str | None,
        labels: Mapping[str, str],
        agent_url: str,
        chosen: tuple[str, ...],
    ) -> RenderResult:
        if tree.diagnostics and has_errors(tree.diagnostics):
            return RenderResult(chosen, None, tuple(tree.diagnostics))
        composition = self.compose(tree, kind, version, labels)
        if not composition.ok:
            return RenderResult(chosen, None, tuple(composition.diagnostics))
        if kind == "vector":
            vector = render_vector(
                composition.config,
                agent_url=agent_url,
                heartbeat_interval=tree.vector_heartbeat_interval,
            )
            found = (*composition.diagnostics, *vector.diagnostics)
            if vector.content is None:
                return RenderResult(chosen, None, found)
            refs = tuple(vector.secret_names)
            return RenderResult(chosen, make_artifact(vector.content, refs), found)
        if kind == "elastic-agent":
            policy = render_elastic(composition.config)
            found = (*composition.diagnostics, *policy.diagnostics)
            if policy.content is None:
                return RenderResult(chosen, None, found)
            refs = tuple(policy.secret_names)
            return RenderResult(chosen, make_artifact(policy.content, refs), found)
        if kind != "telegraf":
            msg = f"no renderer for {kind} on this server"
            return RenderResult(chosen, None, (Diagnostic("SP-5001", None, None, msg),))
        out = render_telegraf(
            composition.config,
            agent_url=agent_url,
            heartbeat_interval=tree.heartbeat_interval,
            version=version,
            tls=dict(tree.telegraf_tls),
        )
        diagnostics = (*composition.diagnostics, *out.diagnostics)
        if out.content is None:
            return RenderResult(chosen, None, diagnostics)
        refs = tuple(out.secret_names)
        return RenderResult(chosen, make_artifact(out.content, refs), diagnostics)
