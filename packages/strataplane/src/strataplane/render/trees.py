"""Parsed spec trees for rendering: every file parsed once per tree, the Layers in merge order
and the render-relevant Settings, cached by tree hash (a revert reuses its tree's entry)."""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field

from strataplane.domain.spec.canonical import Table
from strataplane.domain.spec.diagnostics import Diagnostic, SpecError
from strataplane.domain.spec.precedence import LayerRef, layers_of
from strataplane.domain.spec.validate import load_tree
from strataplane.domain.tree import tree_hash

__all__ = ["SpecTree", "TreeCache", "parse_tree"]

DEFAULT_HEARTBEAT = "1m"
_TLS_FILES = frozenset({"ca", "cert", "key"})
DEFAULT_POLL_TIMEOUT = "5m"


@dataclass(frozen=True)
class SpecTree:
    hash: bytes
    objects: Mapping[str, Table]
    layers: list[LayerRef]
    heartbeat_interval: str = DEFAULT_HEARTBEAT
    render_level: int = 1
    diagnostics: list[Diagnostic] = field(default_factory=list)
    selector_keys: tuple[str, ...] = ()  # every label key a Layer's selector reads
    vector_heartbeat_interval: str = DEFAULT_HEARTBEAT
    telegraf_tls: tuple[tuple[str, str], ...] = ()  # Settings telegraf.tls: (ca|cert|key, value)
    elastic_poll_timeout: str = DEFAULT_POLL_TIMEOUT

    def report_interval(self, kind: str) -> str:
        """How often agents of ``kind`` report: the heartbeat interval the renderer writes,
        Elastic Agent's check-in long-poll timeout (Settings ``elastic-agent.pollTimeout``)."""
        if kind == "elastic-agent":
            return self.elastic_poll_timeout
        return self.vector_heartbeat_interval if kind == "vector" else self.heartbeat_interval


def _setting(settings: Mapping[str, object], *keys: str) -> object:
    value: object = settings
    for key in keys:
        value = value.get(key) if isinstance(value, Mapping) else None
    return value


def parse_tree(files: Mapping[str, bytes]) -> SpecTree:
    digest = tree_hash({p: hashlib.sha256(c).digest() for p, c in files.items()})
    objects, diagnostics = load_tree(files)
    try:
        layers = layers_of(objects)
    except (SpecError, ValueError) as exc:
        diagnostics.append(Diagnostic("SP-5001", None, None, f"the tree's Layers: {exc}"))
        layers = []
    read: set[str] = set()
    for layer in layers:
        read |= layer.selector.keys()
    settings = objects.get("settings.toml", {})
    interval = _setting(settings, "telegraf", "heartbeat", "interval")
    level = _setting(settings, "render", "level")
    vector = _setting(settings, "vector", "heartbeat", "interval")
    tls = _setting(settings, "telegraf", "tls")
    poll = _setting(settings, "elastic-agent", "pollTimeout")
    return SpecTree(
        digest,
        objects,
        layers,
        interval if isinstance(interval, str) else DEFAULT_HEARTBEAT,
        level if isinstance(level, int) else 1,
        diagnostics,
        tuple(sorted(read)),
        vector if isinstance(vector, str) else DEFAULT_HEARTBEAT,
        tuple((k, v) for k, v in sorted(tls.items()) if k in _TLS_FILES and isinstance(v, str))
        if isinstance(tls, Mapping)
        else (),
        poll if isinstance(poll, str) else DEFAULT_POLL_TIMEOUT,
    )


class TreeCache:
    """The parsed trees of recent revisions, per tenant (LRU)."""

    def __init__(self, max_entries: int = 64) -> None:
        self._by_revision: OrderedDict[tuple[object, int], SpecTree] = OrderedDict()
        self._max = max_entries

    def get(self, tenant_id: object, revision_id: int) -> SpecTree | None:
        tree = self._by_revision.get((tenant_id, revision_id))
        if tree is not None:
            self._by_revision.move_to_end((tenant_id, revision_id))
        return tree

    def put(self, tenant_id: object, revision_id: int, tree: SpecTree) -> None:
        self._by_revision[(tenant_id, revision_id)] = tree
        while len(self._by_revision) > self._max:
            self._by_revision.popitem(last=False)
