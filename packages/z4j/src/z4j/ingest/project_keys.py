"""Each project's own redaction keys (``projects.settings.redact_keys``) for ingest, read at
most every ``TTL_SECONDS`` per project and process, so a batch costs no extra query: a change
applies to events received from then on, within that time."""

from __future__ import annotations

import time
import uuid

from z4j.brain import Brain
from z4j.domain.retention import of_settings

TTL_SECONDS = 10.0

_cache: dict[uuid.UUID, tuple[float, tuple[str, ...]]] = {}


async def redact_keys(brain: Brain, project_id: uuid.UUID) -> tuple[str, ...]:
    now = time.monotonic()
    cached = _cache.get(project_id)
    if cached is not None and cached[0] > now:
        return cached[1]
    async with brain.pool.connection() as conn:
        cur = await conn.execute("SELECT settings FROM projects WHERE id = %s", (project_id,))
        row = await cur.fetchone()
    keys = of_settings(row["settings"] if row else None).redact_keys
    _cache[project_id] = (now + TTL_SECONDS, keys)
    return keys


def forget(project_id: uuid.UUID) -> None:
    """Drop a project's cached keys in this process (after a change made here)."""
    _cache.pop(project_id, None)
