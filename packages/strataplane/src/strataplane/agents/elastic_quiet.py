"""Which Elastic Agents a check-in can answer without a round: those whose last round found
no action pending and no POLICY_CHANGE to queue, with no notice about them since.

An agent stays quiet until something could give it an action: a new desired artifact (a
notice about the agent, its range of agents or its tenant, the same notices that invalidate
the state cache) or a queued UNENROLL or SETTINGS (a notice about the agent). Acknowledgements
only take actions away. A quiet check-in is answered from memory (no action; held as a long
poll) and what it reports is written by the batcher (agents/elastic_batch.py). A round marks
an agent quiet only when no notice came while it ran (``epoch``): the round's snapshot may
predate the change the notice announced.
"""

from __future__ import annotations

from uuid import UUID

__all__ = ["QuietAgents"]


class QuietAgents:
    def __init__(self) -> None:
        self._agents: dict[UUID, tuple[UUID, bytes | None]] = {}  # agent: (tenant, desired)
        self.epoch = 0  # bumped by every notice that may give an agent an action

    def is_quiet(self, tenant_id: UUID, agent_id: UUID, desired: bytes | None) -> bool:
        """True when the agent's last round left nothing to deliver while it desires
        ``desired``."""
        return self._agents.get(agent_id) == (tenant_id, desired)

    def mark(self, tenant_id: UUID, agent_id: UUID, desired: bytes | None, epoch: int) -> None:
        """A round that began at ``epoch`` found nothing to deliver."""
        if epoch == self.epoch:
            self._agents[agent_id] = (tenant_id, desired)

    def forget(self, agent_id: UUID) -> None:
        """The agent has an action to deliver (its round delivered one)."""
        self._agents.pop(agent_id, None)

    def agent_changed(self, tenant_id: UUID, agent_id: UUID) -> None:
        self.epoch += 1
        if self._agents.get(agent_id, (None,))[0] == tenant_id:
            del self._agents[agent_id]

    def range_changed(self, tenant_id: UUID, first: UUID, last: UUID) -> None:
        self.epoch += 1
        for agent_id in [
            a for a, (t, _d) in self._agents.items() if t == tenant_id and first <= a <= last
        ]:
            del self._agents[agent_id]

    def tenant_changed(self, tenant_id: UUID) -> None:
        self.epoch += 1
        for agent_id in [a for a, (t, _d) in self._agents.items() if t == tenant_id]:
            del self._agents[agent_id]

    def clear(self) -> None:
        """Notices may have been missed (the listener reconnected)."""
        self.epoch += 1
        self._agents.clear()
