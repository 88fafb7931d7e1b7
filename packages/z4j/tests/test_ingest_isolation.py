"""One bad event never loses the others: the screen's rule, the frame envelope peek, and the
writer's fallback to one event at a time when PostgreSQL refuses a batch for its data."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime
from typing import Any

import psycopg
from hypothesis import given
from hypothesis import strategies as st
from platformkit.storable import find_unstorable
from z4j.domain.storable_events import REPAIRED_KEY, screen_events
from z4j.ingest.batch import ingest_batch
from z4j.ingest.frames import peek_envelope

from .conftest import Seed

_text = st.text(alphabet=st.sampled_from(["a", "\x00", "\ud800", "\udfff", "é", "{"]), max_size=4)
_leaf = st.none() | st.booleans() | st.integers() | st.floats() | _text
_value = st.recursive(
    _leaf,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_text, inner, max_size=3),
    max_leaves=8,
)
_events = st.lists(st.fixed_dictionaries({"id": _text, "data": st.dictionaries(_text, _value)}))


@given(_events)
def test_each_event_is_kept_repaired_or_refused_in_order(events: list[dict[str, Any]]) -> None:
    screened = screen_events(events)
    kept = [screened.position(i) for i in range(len(screened.events))]
    refused = [r.index for r in screened.refused]
    assert sorted(kept + refused) == list(range(len(events)))
    assert kept == sorted(kept)
    bound = 10**4301
    for index, event in zip(kept, screened.events, strict=True):
        assert find_unstorable(event, int_min=-bound, int_max=bound) is None
        assert (event is events[index]) != (event["data"].get(REPAIRED_KEY) is True)
    for refusal in screened.refused:
        assert "not a finite number" in refusal.reason
    assert screened.repaired == sum(1 for e in screened.events if REPAIRED_KEY in e["data"])


def test_the_envelope_is_read_outside_nested_values_only() -> None:
    frame = '{"hmac":"0","id":"f-1","payload":{"id":"inner","type":"x"},"type":"event_batch"}'
    assert peek_envelope(frame) == ("event_batch", "f-1")
    assert peek_envelope('{"payload":{"id":"inner","type":"heartbeat"}}') == (None, None)
    assert peek_envelope('["id", "type"]') == (None, None)
    assert peek_envelope(b'{"type":"event_batch","id":"f-2","payload":' + b"[" * 9999 + b"}") == (
        "event_batch",
        "f-2",
    )


async def test_a_batch_the_database_refuses_is_written_one_event_at_a_time(seed: Seed) -> None:
    owner = await seed.user(f"{uuid.uuid4().hex[:8]}@example.com", is_admin=True)
    project = await seed.project(owner)
    agent_id = (await seed.agent(owner, project)).agent["id"]
    now = datetime.now(UTC).isoformat()

    def event(task: str, **data: Any) -> dict[str, Any]:
        return {
            "id": f"e-{task}",
            "kind": "task.sent",
            "task_id": task,
            "occurred_at": now,
            "data": {"task_name": "app.add", **data},
        }

    # Not screened (the parse found nothing suspect), so PostgreSQL itself refuses the NUL.
    events = [event("ok-1"), event("nul-1", args=["a\x00b"]), event("ok-2"), {"kind": 1}]
    outcome = await ingest_batch(seed.brain, project, agent_id, events, suspect=False)
    assert outcome.accepted == 2
    assert [(r.index, r.event_id) for r in outcome.refused] == [(1, "e-nul-1"), (3, None)]
    assert outcome.refused[0].reason.startswith("not storable: UntranslatableCharacter")
    assert json.dumps(outcome.refused[0].reason).isascii()
    with psycopg.connect(seed.admin_url) as conn:
        stored = conn.execute(
            "SELECT engine_task_id FROM tasks WHERE project_id = %s ORDER BY 1", (project,)
        ).fetchall()
    assert stored == [("ok-1",), ("ok-2",)]
