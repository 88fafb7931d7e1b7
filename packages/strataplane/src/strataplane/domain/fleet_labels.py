"""A host's effective labels (spec-format.md §2.1, §2.2): the winning value of each key by
source precedence, plus the built-in labels that come from the host row.

Sources in ascending precedence are the ``label_source`` enum order: agent < zone < enrollment
< placement < manual. No source sets ``host.name``, ``host.kind`` or ``owner``; only agent facts
set ``os`` and ``arch`` (the CHECK on ``host_label.key``).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Mapping

from strataplane.domain.spec.selectors import label_key_ok, label_value_problem

__all__ = [
    "BUILT_IN",
    "SOURCES",
    "LabelError",
    "check_labels",
    "effective_labels",
    "longest_prefix",
]

SOURCES = ("agent", "zone", "enrollment", "placement", "manual")
BUILT_IN = frozenset({"host.name", "host.kind", "owner"})
_AGENT_ONLY = frozenset({"os", "arch"})


class LabelError(ValueError):
    """A label that no source may set, with the offending key."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(f"{key}: {message}")
        self.key = key


def check_labels(labels: Mapping[str, object], source: str) -> dict[str, str]:
    """The labels ``source`` may write, as strings; LabelError for the first bad one."""
    out: dict[str, str] = {}
    for key, value in labels.items():
        if not label_key_ok(key):
            raise LabelError(key, "label keys are 1-128 of a-z 0-9 _ . - / (ends alphanumeric)")
        if key in BUILT_IN:
            raise LabelError(key, "a built-in label comes from the host row")
        if key in _AGENT_ONLY and source != "agent":
            raise LabelError(key, "only agent facts set os and arch")
        problem = label_value_problem(value)
        if problem is not None:
            raise LabelError(key, problem)
        assert isinstance(value, str)
        out[key] = value
    return out


def effective_labels(
    rows: Iterable[tuple[str, str, str]], *, name: str, kind: str, owner: str | None
) -> dict[str, str]:
    """``host.labels`` from (source, key, value) rows and the host row's built-ins."""
    rank = {source: i for i, source in enumerate(SOURCES)}
    best: dict[str, tuple[int, str]] = {}
    for source, key, value in rows:
        r = rank[source]
        if key not in best or r > best[key][0]:
            best[key] = (r, value)
    labels = {key: value for key, (_r, value) in sorted(best.items())}
    labels["host.name"] = name
    labels["host.kind"] = kind
    if owner is not None:
        labels["owner"] = owner
    return dict(sorted(labels.items()))


def longest_prefix(
    address: str, zones: Iterable[tuple[str, Mapping[str, str]]]
) -> Mapping[str, str] | None:
    """The labels of the zone whose CIDR is the longest prefix containing ``address``."""
    ip = ipaddress.ip_address(address)
    best: tuple[int, Mapping[str, str]] | None = None
    for cidr, labels in zones:
        net = ipaddress.ip_network(cidr, strict=False)
        if ip.version == net.version and ip in net and (best is None or net.prefixlen > best[0]):
            best = (net.prefixlen, labels)
    return best[1] if best is not None else None
