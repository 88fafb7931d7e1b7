"""``stack up``, the README's bring-up command: every installed system answers, and Ctrl-C in its
terminal or SIGTERM to the command alone (``kill``, ``timeout``, a service manager) stops all."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from importlib.metadata import entry_points
from pathlib import Path

import httpx
import pytest
from platformkit.testing.services import free_port

PORT_VARIABLES = {"z4j": "Z4J_PORT", "strataplane": "STRATAPLANE_PORT", "agentbus": "AGENTBUS_PORT"}


def _children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(entry.name))
    return found


def _alive(pid: int) -> bool:
    """Running, not a zombie waiting for a reaper that may never come."""
    try:
        return (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _healthy(url: str) -> bool:
    try:
        return httpx.get(url, timeout=1).status_code == 200
    except httpx.HTTPError:
        return False


def _as_from_a_terminal() -> None:
    """Ctrl-C as a terminal delivers it, also when this run was started in the background by a
    shell without job control, which passes SIGINT on ignored."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.mark.parametrize("stop", ["ctrl-c", "sigterm", "sigkill"])
def test_stack_up_serves_every_system_and_stops_cleanly(tmp_path: Path, stop: str) -> None:
    systems = sorted(ep.name for ep in entry_points(group="platformkit.services"))
    ports = {name: free_port() for name in systems}
    env = {
        **os.environ,
        "XDG_DATA_HOME": str(tmp_path / "data"),
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
        "PLATFORMKIT_PG_PORT": str(free_port()),
        "PLATFORMKIT_NATS_PORT": str(free_port()),
        **{PORT_VARIABLES[name]: str(port) for name, port in ports.items()},
    }
    log = (tmp_path / "stack.log").open("wb")
    proc = subprocess.Popen(
        [sys.executable, "-m", "platformkit.stack", "up"],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        preexec_fn=_as_from_a_terminal,
    )
    try:
        deadline = time.monotonic() + 120
        waiting = dict(ports)
        while waiting and time.monotonic() < deadline:
            assert proc.poll() is None, (tmp_path / "stack.log").read_text()[-3000:]
            waiting = {
                n: p for n, p in waiting.items() if not _healthy(f"http://127.0.0.1:{p}/healthz")
            }
            time.sleep(0.5)
        assert not waiting, (
            f"not healthy: {waiting}\n{(tmp_path / 'stack.log').read_text()[-3000:]}"
        )
        # the embedded NATS is a child too, kept running (as PostgreSQL) until `stack down`
        servers = [
            pid
            for pid in _children(proc.pid)
            if b"nats-server" not in (Path("/proc") / str(pid) / "cmdline").read_bytes()
        ]
        assert len(servers) == len(systems)
        if stop == "ctrl-c":
            os.killpg(proc.pid, signal.SIGINT)  # the terminal signals its whole process group
        elif stop == "sigterm":
            proc.send_signal(signal.SIGTERM)  # the servers run in their own process groups
        else:
            proc.kill()  # no cleanup runs: the servers end because their parent did
        proc.wait(timeout=60)
        deadline = time.monotonic() + 120
        while any(map(_alive, servers)) and time.monotonic() < deadline:
            time.sleep(0.5)
        assert not [pid for pid in servers if _alive(pid)]
        for port in ports.values():
            assert not _healthy(f"http://127.0.0.1:{port}/healthz")
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        log.close()
        subprocess.run(
            [sys.executable, "-m", "platformkit.stack", "down"],
            env=env,
            capture_output=True,
            timeout=60,
            check=False,
        )
