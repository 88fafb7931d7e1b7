"""The kernel under real granian, over TCP: two workers, metrics summed across them, JSON logs,
``serve`` stopping cleanly on SIGTERM, requests that wait told of the stop first, and the Rust
runtime a system asks for."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest
from fastapi import FastAPI
from platformkit.http import create_app, drain, start_server
from platformkit.testing.services import free_port, tcp_reachable
from prometheus_client import Counter

HERE = Path(__file__).parent
TARGET = f"{Path(__file__).stem}:make_app"


def make_app() -> FastAPI:
    """The app granian imports in its workers (this module is on their path)."""
    app = create_app(title="granian-test", version="1")
    looked_up = Counter("test_items_looked_up", "Items looked up")

    @app.get("/items/{item_id}")
    async def item(item_id: int) -> dict[str, int]:
        looked_up.inc()
        return {"id": item_id}

    @app.get("/wait")
    async def wait() -> dict[str, bool]:
        """A long-poll: up to 30 s, or until the server announces its stop."""
        if not hasattr(app.state, "stopping"):
            app.state.stopping = asyncio.Event()
            app.state.watching = drain.watch(app.state.stopping.set) is not None
        try:
            await asyncio.wait_for(app.state.stopping.wait(), 30)
        except TimeoutError:
            return {"drained": False}
        return {"drained": True}

    @app.post("/wedge")
    async def wedge() -> dict[str, bool]:
        # A worker that cannot finish exiting: Python waits for non-daemon threads at exit.
        threading.Thread(target=threading.Event().wait, daemon=False).start()
        return {"wedged": True}

    return app


def scrape(text: str, prefix: str) -> float:
    return sum(
        float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith(prefix)
    )


async def test_two_workers_serve_health_and_metrics_over_tcp(tmp_path: Path) -> None:
    port = free_port()
    log_file = tmp_path / "granian.log"
    server = start_server(
        TARGET, port=port, workers=2, factory=True, working_dir=HERE, log_file=log_file
    )
    try:
        server.wait_ready()
        limits = httpx.Limits(max_keepalive_connections=0)  # a new connection per request
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", limits=limits) as c:
            for _ in range(20):
                r = await c.get("/healthz")
                assert r.status_code == 200
                assert r.json() == {"status": "ok"}
            for n in range(10):
                assert (await c.get(f"/items/{n}")).json()["id"] == n
            metrics = await c.get("/metrics")
        assert metrics.status_code == 200
        text = metrics.text
        # Whichever worker answered the scrape, the counts are the sum over both workers.
        route = 'http_requests_total{method="GET",route='
        assert scrape(text, route + '"/healthz",status="200"}') == 20
        assert scrape(text, route + '"/items/{item_id}",status="200"}') == 10
        assert scrape(text, "test_items_looked_up_total") == 10
        # One sample file per worker that served something; the scrape summed them.
        assert list((server.runtime_dir / "metrics").glob("counter_*.db"))
    finally:
        assert server.stop() == 0
    assert not server.runtime_dir.exists()
    lines = [line for line in log_file.read_text().splitlines() if line.strip()]
    records = [json.loads(line) for line in lines]  # every line granian or we wrote is JSON
    access = [r for r in records if r["logger"] == "platformkit.http.access"]
    assert {r["route"] for r in access} == {"/items/{item_id}"}  # probes are debug-level
    assert all(r["request_id"] for r in access)
    assert any(r["logger"] == "_granian" for r in records)


@pytest.mark.parametrize("environment", [None, "mt"])
def test_a_single_threaded_runtime_serves_unless_the_environment_says_otherwise(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, environment: str | None
) -> None:
    if environment is not None:
        monkeypatch.setenv("GRANIAN_RUNTIME_MODE", environment)
    port = free_port()
    server = start_server(
        TARGET, port=port, factory=True, working_dir=HERE, log_file=tmp_path / "granian.log",
        runtime_mode="st",
    )  # fmt: skip
    try:
        server.wait_ready()
        assert httpx.get(f"http://127.0.0.1:{port}/items/7").json() == {"id": 7}
    finally:
        assert server.stop() == 0
    args = list(server.process.args)
    assert ("--runtime-mode" in args) == (environment is None)
    if environment is None:
        assert args[args.index("--runtime-mode") + 1] == "st"


def test_a_worker_that_hangs_on_stop_is_killed_and_the_server_exits(tmp_path: Path) -> None:
    port = free_port()
    server = start_server(
        TARGET,
        port=port,
        factory=True,
        working_dir=HERE,
        log_file=tmp_path / "granian.log",
        workers_kill_timeout=2,
    )
    server.wait_ready()
    assert httpx.post(f"http://127.0.0.1:{port}/wedge").json() == {"wedged": True}
    started = time.monotonic()
    assert server.stop(timeout=20) == 0
    assert time.monotonic() - started < 10
    assert "refused to gracefully stop" in (tmp_path / "granian.log").read_text()


def _serve_in_a_child(tmp_path: Path, port: int, code: str) -> subprocess.Popen[bytes]:
    """Run ``code`` (which calls ``serve``) in a child process; return once it listens."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(HERE), os.environ.get("PYTHONPATH")])),
    }
    with open(tmp_path / "serve.log", "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-c", code], env=env, stdout=out, stderr=subprocess.STDOUT
        )
    deadline = time.monotonic() + 30
    while not tcp_reachable("127.0.0.1", port, timeout=0.2):
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            proc.wait()
            raise AssertionError("serve did not start: " + (tmp_path / "serve.log").read_text())
        time.sleep(0.05)
    return proc


@contextmanager
def _serving(tmp_path: Path, port: int, workers: int = 1) -> Iterator[subprocess.Popen[bytes]]:
    """``serve`` in a child that exits with its status; killed if a test leaves it running,
    and its port must be closed afterwards."""
    code = (
        "import sys\n"
        "from platformkit.http import serve\n"
        f"sys.exit(serve({TARGET!r}, '127.0.0.1', {port}, {workers}, factory=True))\n"
    )
    proc = _serve_in_a_child(tmp_path, port, code)
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert not tcp_reachable("127.0.0.1", port, timeout=0.2)


def test_serve_forwards_sigterm_and_exits(tmp_path: Path) -> None:
    port = free_port()
    with _serving(tmp_path, port) as proc:
        assert httpx.get(f"http://127.0.0.1:{port}/healthz").status_code == 200
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=20) == 0


def test_a_second_sigterm_stops_serve_at_once(tmp_path: Path) -> None:
    # The first signal is forwarded and granian waits for the wedged worker (up to its kill
    # timeout, 10 s); the second is not forwarded but ends granian and its workers at once.
    port = free_port()
    with _serving(tmp_path, port) as proc:
        assert httpx.post(f"http://127.0.0.1:{port}/wedge").json() == {"wedged": True}
        proc.send_signal(signal.SIGTERM)
        time.sleep(1.0)
        assert proc.poll() is None  # still waiting for the wedged worker
        started = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=20)
        assert time.monotonic() - started < 5


def test_a_server_whose_parent_is_killed_stops_too(tmp_path: Path) -> None:
    # SIGKILL leaves the parent no chance to stop granian; the server must not live on as an
    # orphan holding the port.
    port = free_port()
    code = (
        "from platformkit.http import serve\n"
        f"serve({TARGET!r}, '127.0.0.1', {port}, 1, factory=True)\n"
    )
    proc = _serve_in_a_child(tmp_path, port, code)
    proc.kill()
    proc.wait()
    deadline = time.monotonic() + 20
    while tcp_reachable("127.0.0.1", port, timeout=0.2):
        assert time.monotonic() < deadline, "the server outlived its killed parent"
        time.sleep(0.1)


def test_a_waiting_request_hears_of_the_stop_before_granian_waits_for_it(tmp_path: Path) -> None:
    """Without the drain pipe granian would wait for both long-polls until its kill timeout
    (10 s), then cut them off; with it they answer at once, in both workers."""
    port = free_port()
    with _serving(tmp_path, port, workers=2) as proc:
        url = f"http://127.0.0.1:{port}/wait"
        answers: list[httpx.Response] = []

        def poll() -> None:
            answers.append(httpx.get(url, timeout=40))

        polls = [threading.Thread(target=poll) for _ in range(4)]
        for thread in polls:
            thread.start()
        time.sleep(1.5)  # every poll waiting in a worker
        started = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
        stopped_in = time.monotonic() - started
        for thread in polls:
            thread.join(10)
    assert [a.json() for a in answers] == [{"drained": True}] * 4
    assert stopped_in < 5


def test_watch_needs_the_pipe_the_environment_names(monkeypatch: pytest.MonkeyPatch) -> None:
    """In a process that did not inherit the pipe (no variable, another file under that
    number, a pipe that is not the one named) nothing is watched; the named one is."""

    async def check() -> None:
        monkeypatch.delenv(drain.ENV, raising=False)
        assert drain.watch(lambda: None) is None
        not_a_pipe = os.open(__file__, os.O_RDONLY)
        try:
            monkeypatch.setenv(drain.ENV, f"{not_a_pipe}:{os.fstat(not_a_pipe).st_ino}")
            assert drain.watch(lambda: None) is None
        finally:
            os.close(not_a_pipe)
        other, pipe = drain.DrainPipe(), drain.DrainPipe()
        monkeypatch.setenv(drain.ENV, f"{pipe.read_fd}:{os.fstat(other.read_fd).st_ino}")
        assert drain.watch(lambda: None) is None
        monkeypatch.setenv(drain.ENV, pipe.env_value)
        heard = asyncio.Event()
        unwatch = drain.watch(heard.set)
        assert unwatch is not None
        await asyncio.sleep(0.05)
        assert not heard.is_set()
        pipe.announce()
        pipe.announce()  # once is enough; again changes nothing
        await asyncio.wait_for(heard.wait(), 5)
        unwatch()
        for each in (other, pipe):
            each.announce()
            each.started()

    asyncio.run(check())
