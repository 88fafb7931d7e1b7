"""Reading the task list's filters from a query string; the API and the dashboard share it.

Empty values count as absent (a submitted filter form sends every field). ``state`` may repeat
or hold a comma-separated list. Times are ISO 8601; one without an offset is UTC.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Literal

from z4j.actions.errors import InvalidInput
from z4j.store.tasks_read import TaskFilters


def _time(value: str | None, field: str) -> datetime | None:
    if not value:
        return None
    try:
        at = datetime.fromisoformat(value.strip())
    except ValueError:
        raise InvalidInput(
            "Use an ISO 8601 time such as 2025-01-31T12:00:00Z.", field=field
        ) from None
    return at if at.tzinfo is not None else at.replace(tzinfo=UTC)


def _uuid(value: str | None, field: str) -> uuid.UUID | None:
    if not value:
        return None
    try:
        return uuid.UUID(value.strip())
    except ValueError:
        raise InvalidInput("Not an id.", field=field) from None


def build_filters(
    *,
    state: Sequence[str] = (),
    name: str | None = None,
    queue: str | None = None,
    agent_id: str | None = None,
    since: str | None = None,
    until: str | None = None,
    time_field: str | None = None,
    q: str | None = None,
) -> TaskFilters:
    states = tuple(s.strip() for value in state for s in value.split(",") if s.strip())
    field: Literal["created", "enqueued"] = "created"
    if time_field == "enqueued":
        field = "enqueued"
    elif time_field not in (None, "", "created"):
        raise InvalidInput("time_field is created or enqueued.", field="time_field")
    return TaskFilters(
        states=states,
        name=(name or "").strip() or None,
        queue=(queue or "").strip() or None,
        agent_id=_uuid(agent_id, "agent_id"),
        since=_time(since, "since"),
        until=_time(until, "until"),
        time_field=field,
        q=(q or "").strip() or None,
    )


def parse_limit(value: str | None, default: int) -> int:
    if not value:
        return default
    try:
        return int(value)
    except ValueError:
        raise InvalidInput("limit is a number.", field="limit") from None
