"""The hello's identity and the worker's ``active_tasks``: sent whole or not at all."""

from __future__ import annotations

from z4j_agent.identity import ProcessIdentity, active_tasks_field, hello_payload
from z4j_agent.protocol import MAX_ACTIVE_TASKS


def test_a_worker_reports_its_active_tasks_in_hello() -> None:
    identity = ProcessIdentity("celery@a", "task", active_tasks=lambda: ["t1", "t2"])
    assert hello_payload(identity)["active_tasks"] == ["t1", "t2"]
    assert active_tasks_field(identity) == {"active_tasks": ["t1", "t2"]}


def test_an_empty_list_is_said_and_a_producer_says_nothing() -> None:
    assert active_tasks_field(ProcessIdentity("celery@a", "task", active_tasks=list)) == {
        "active_tasks": []
    }
    assert "active_tasks" not in hello_payload(ProcessIdentity("p@h", "producer"))


def test_too_many_or_a_failing_probe_send_nothing_rather_than_a_part() -> None:
    many = [str(i) for i in range(MAX_ACTIVE_TASKS + 1)]
    assert active_tasks_field(ProcessIdentity("w", "task", active_tasks=lambda: many)) == {}

    def broken() -> list[str]:
        raise RuntimeError("active requests kept changing")

    assert active_tasks_field(ProcessIdentity("w", "task", active_tasks=broken)) == {}
