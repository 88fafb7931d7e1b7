"""Work of one tenant that callers ask for at about the same moment, done together.

Each caller asks for a key; every key of a tenant asked for while that tenant's previous round
is under way goes into the next round, so under load many callers share one transaction, and a
caller alone waits for one round, as before. Callers asking for the same key share its answer.

Two uses. Reads: the short-lived copies on the request path (an agent's state behind a
credential, the sender's key, the recipient, the tenant's data key) are read again once a
second, and with many agents each sending now and then nearly every request finds its copy
expired; each miss paid a transaction of its own for a row. Writes: the sends, pulls, acks and
reads of many agents, each carrying a message or two, are written by one transaction per round
(group commit: ``gateway.actions.send``, ``delivery.pull``, ``delivery.settle``); there each
caller's key is its own request.

A round that fails fails every caller waiting on it; a caller that is cancelled leaves the
round to the others.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable, Hashable, Mapping
from typing import Any

type Round[K, V] = Callable[[uuid.UUID, list[K]], Awaitable[Mapping[K, V]]]


def _retrieved(future: asyncio.Future[Any]) -> None:
    """Mark a failed round's exception as seen, for a future whose callers all went away."""
    if not future.cancelled():
        future.exception()


class Gathered[K: Hashable, V]:
    """``ask(tenant, key)`` -> what ``do(tenant, keys)`` answered for ``key``, or None."""

    def __init__(self, do: Round[K, V]) -> None:
        self._do = do
        self._asked: dict[uuid.UUID, dict[K, asyncio.Future[V | None]]] = {}
        self._readers: dict[uuid.UUID, asyncio.Task[None]] = {}
        self.rounds = 0  # rounds done, for tests and the curious

    async def ask(self, tenant_id: uuid.UUID, key: K) -> V | None:
        asked = self._asked.setdefault(tenant_id, {})
        future = asked.get(key)
        if future is None:
            future = asked[key] = asyncio.get_running_loop().create_future()
            future.add_done_callback(_retrieved)
            if tenant_id not in self._readers:
                self._readers[tenant_id] = asyncio.create_task(self._drain(tenant_id))
        return await asyncio.shield(future)

    async def _drain(self, tenant_id: uuid.UUID) -> None:
        """The tenant's asked keys, then those asked for meanwhile, until none is left. The
        first round starts on the loop's next turn, so the callers of one turn share it."""
        asked: dict[K, asyncio.Future[V | None]] = {}
        try:
            while asked := self._asked.pop(tenant_id, {}):
                self.rounds += 1
                try:
                    answers = await self._do(tenant_id, list(asked))
                except Exception as exc:
                    for future in asked.values():
                        if not future.done():
                            future.set_exception(exc)
                    continue
                for key, future in asked.items():
                    if not future.done():
                        future.set_result(answers.get(key))
        finally:  # cancelled (the process stops): nobody is left waiting for ever
            del self._readers[tenant_id]
            for future in [*asked.values(), *self._asked.pop(tenant_id, {}).values()]:
                future.cancel()


class Rounds(dict[str, Gathered[Any, Any]]):
    """A process's group commits, by name, each made on first use (``of``)."""

    def of(self, name: str, do: Round[Any, Any]) -> Gathered[Any, Any]:
        rounds = self.get(name)
        if rounds is None:
            rounds = self[name] = Gathered(do)
        return rounds
