"""``z4j serve`` as a process under a supervisor: its log lines are JSON, and a serve process
killed outright takes its server with it, so nothing lives on serving the port."""

from __future__ import annotations

import json
import signal
import time

import httpx
from z4j.testing import BrainProcess


def _answers(url: str) -> bool:
    try:
        return httpx.get(f"{url}/healthz", timeout=1).status_code == 200
    except httpx.HTTPError:
        return False


def test_a_killed_serve_leaves_nothing_serving(brain_server: BrainProcess) -> None:
    assert _answers(brain_server.url)
    assert brain_server.proc is not None
    brain_server.proc.send_signal(signal.SIGKILL)  # the serve process alone, not its group
    brain_server.proc.wait(timeout=10)
    deadline = time.monotonic() + 15
    while _answers(brain_server.url) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not _answers(brain_server.url), "the brain's server outlived its serve process"


def test_the_server_logs_json_lines(brain_server: BrainProcess) -> None:
    lines = [line for line in brain_server.log_path.read_text().splitlines() if '"ts"' in line]
    assert lines, brain_server.log_path.read_text()[-2000:]
    assert {json.loads(line)["logger"] for line in lines} >= {"_granian"}
