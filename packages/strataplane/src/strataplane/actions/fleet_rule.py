"""Which revision each agent of a kind should run (schema: release): an active pin (the
agent's own, then a selector pin; newest first), else its assignment in the active rollout
(to_revision), else the release pointer. ``DesiredRule`` is read once per pass and applied to
each agent; its ``signature`` changes whenever any agent's answer may have changed, so the
reconciler skips passes that could change nothing."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from uuid import UUID

from platformkit.db.scope import Conn

from strataplane.domain.rollouts import Pin, active_pin, desired_revision
from strataplane.store import fleet_spec, pins, rollouts
from strataplane.store.fleet_desired import RenderInput

__all__ = ["DesiredRule", "load_rule"]


@dataclass(frozen=True)
class DesiredRule:
    kind: str
    pointer: int
    rollout_id: UUID | None = None
    to_revision: int | None = None
    assigned: frozenset[UUID] = frozenset()
    pins: tuple[Pin, ...] = ()
    now: datetime = field(default_factory=lambda: datetime.now(UTC))

    @property
    def simple(self) -> bool:
        """Every agent follows the pointer (no active rollout assignments, no pins)."""
        return not self.assigned and not self.active_pins

    @property
    def active_pins(self) -> tuple[Pin, ...]:
        return tuple(p for p in self.pins if p.active(self.now))

    @property
    def signature(self) -> tuple[object, ...]:
        return (
            self.pointer,
            self.rollout_id,
            len(self.assigned),
            tuple(sorted(str(p.id) for p in self.active_pins)),
        )

    def pin_of(self, agent: RenderInput) -> Pin | None:
        return active_pin(self.active_pins, agent.id, agent.kind, agent.labels, self.now)

    def revision_for(self, agent: RenderInput) -> int:
        assigned = self.to_revision if agent.id in self.assigned else None
        return desired_revision(self.pin_of(agent), assigned, self.pointer)[0]


async def load_rule(conn: Conn, tenant_id: UUID, kind: str) -> DesiredRule | None:
    pointer = await fleet_spec.release_revision(conn, tenant_id, kind)
    if pointer is None:
        return None
    active = await rollouts.active_rollout(conn, tenant_id, kind)
    held = tuple(p.rule() for p in await pins.list_pins(conn, tenant_id, active_only=True))
    if active is None:
        return DesiredRule(kind, pointer, pins=held)
    taken = frozenset(await rollouts.assigned(conn, tenant_id, active.id))
    return DesiredRule(kind, pointer, active.id, active.to_revision_id, taken, held)
