"""The fleet at a glance, from the agents a person may read: counts by kind, health, sync and
version, the share in sync, and who stopped reporting. A pure function of the agents."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol
from uuid import UUID

HEALTH = ("healthy", "pending", "degraded", "failed", "not_reporting")
SYNC = ("in_sync", "updating", "out_of_sync", "render_error")


class AgentLike(Protocol):
    @property
    def id(self) -> UUID: ...
    @property
    def host_id(self) -> UUID: ...
    @property
    def kind(self) -> str: ...
    @property
    def version(self) -> str | None: ...
    @property
    def health(self) -> str: ...
    @property
    def sync(self) -> str: ...
    @property
    def last_seen_at(self) -> datetime | None: ...


@dataclass(frozen=True)
class Overview:
    agents: int
    hosts: int
    by_kind: list[tuple[str, int]]
    by_health: list[tuple[str, int]]  # every health state, in HEALTH's order
    by_sync: list[tuple[str, int]]  # every sync state, in SYNC's order
    versions: list[tuple[str, int]]  # "kind version", most agents first
    in_sync: int
    not_reporting: list[UUID]  # longest silent first

    @property
    def in_sync_share(self) -> float | None:
        """In-sync agents over all agents; None without agents."""
        return self.in_sync / self.agents if self.agents else None


def _ordered(counts: Counter[str], order: Iterable[str]) -> list[tuple[str, int]]:
    known = list(order)
    rest = sorted(k for k in counts if k not in known)
    return [(k, counts.get(k, 0)) for k in known + rest]


def overview(agents: Sequence[AgentLike]) -> Overview:
    versions = Counter(f"{a.kind} {a.version or 'unknown'}" for a in agents)
    silent = sorted(
        (a for a in agents if a.health == "not_reporting"),
        key=lambda a: (a.last_seen_at is not None, a.last_seen_at or datetime.min, a.id),
    )
    return Overview(
        agents=len(agents),
        hosts=len({a.host_id for a in agents}),
        by_kind=sorted(Counter(a.kind for a in agents).items()),
        by_health=_ordered(Counter(a.health for a in agents), HEALTH),
        by_sync=_ordered(Counter(a.sync for a in agents), SYNC),
        versions=sorted(versions.items(), key=lambda kv: (-kv[1], kv[0])),
        in_sync=sum(1 for a in agents if a.sync == "in_sync"),
        not_reporting=[a.id for a in silent],
    )
