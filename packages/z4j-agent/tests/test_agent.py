"""The per-process agent: recording never raises, and producers start shipping on their own."""

from __future__ import annotations

import json
import logging
import os
import time
from pathlib import Path

import pytest
from z4j_agent import Agent, AgentConfig, ConfigError, EventBuffer, ProcessIdentity

SECRET = os.urandom(32)


def config(tmp_path: Path) -> AgentConfig:
    return AgentConfig(
        brain_url="http://127.0.0.1:9",
        token="t",
        hmac_secret=SECRET,
        buffer_path=tmp_path / "b.sqlite3",
    )


def test_an_invalid_config_disables_the_agent_once(caplog: pytest.LogCaptureFixture) -> None:
    def broken() -> AgentConfig:
        raise ConfigError("Z4J_TOKEN is not set")

    agent = Agent(broken)
    with caplog.at_level(logging.ERROR, logger="z4j_agent"):
        for _ in range(3):
            agent.record("task.sent", "t", {"task_name": "x"})
    assert not agent.enabled
    assert caplog.text.count("z4j agent disabled: Z4J_TOKEN is not set") == 1


def test_recording_failures_are_logged_not_raised(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    agent = Agent(config(tmp_path))
    with caplog.at_level(logging.ERROR, logger="z4j_agent"):
        agent.record("task.nonsense", "t", {})
    assert "could not record a task.nonsense event" in caplog.text


def test_records_into_the_named_buffer_and_auto_ships(tmp_path: Path) -> None:
    agent = Agent(config(tmp_path))
    agent.auto_ship = lambda: ProcessIdentity(worker_id="producer@test", worker_role="producer")
    agent.record("task.sent", "t1", {"task_name": "x", "kwargs": {"token": "abc"}})
    try:
        assert agent.transport is not None
        assert agent.transport.alive
    finally:
        agent.stop(1.0)
    assert agent.transport is None
    rows = EventBuffer(tmp_path / "b.sqlite3").peek(10)
    event = json.loads(rows[0][1])
    assert (event["kind"], event["task_id"]) == ("task.sent", "t1")
    assert event["data"]["kwargs"] == {"token": "[redacted]"}


def test_switching_buffers_hands_over_the_transport(tmp_path: Path) -> None:
    agent = Agent(
        AgentConfig(
            brain_url="http://127.0.0.1:9",
            token="t",
            hmac_secret=SECRET,
            buffer_path=Path(str(tmp_path) + "/"),
        )
    )
    agent.use_buffer("producer-app")
    agent.start_transport(ProcessIdentity(worker_id="p", worker_role="producer"))
    first = agent.transport
    agent.use_buffer("worker-w@h")
    assert first is not None
    for _ in range(100):
        if not first.alive:
            break
        time.sleep(0.05)
    assert not first.alive
    assert agent.transport is None
    assert agent.buffer.path == tmp_path / "worker-w@h.sqlite3"
