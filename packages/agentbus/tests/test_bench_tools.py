"""The benchmark's own tools: the lean HTTP client keeps its connections alive and reads
``Content-Length`` bodies; the CPU meter counts a process tree, including children that have
already ended, and reports milliseconds per message; the host probe finds the stretches in
which the machine's CPU ran slow; a failed run shows the gateway's last logged errors; the lone
rounds read the meter between requests only in the rounds that are not timed."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import cast

import pytest
from agentbus.bench import deploy, host, http, runs
from agentbus.bench.cpu import CpuMeter
from agentbus.bench.lone import lone_rounds
from hypothesis import given
from hypothesis import strategies as st


async def test_client_reuses_connections_and_reads_bodies() -> None:
    connections, seen = 0, []

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal connections
        connections += 1
        while True:
            try:
                head = await reader.readuntil(b"\r\n\r\n")
            except asyncio.IncompleteReadError:
                break  # the client closed the connection
            lines = head.decode().split("\r\n")
            size = next(
                int(v) for k, _, v in (x.partition(": ") for x in lines) if k == "Content-Length"
            )
            body = await reader.readexactly(size)
            seen.append((lines[0], "Authorization: Bearer t" in lines, body))
            answer = b'{"n": %d}' % len(seen)
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(answer), answer))
        writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    client = http.Client(f"http://127.0.0.1:{port}", 1, {"Authorization": "Bearer t"})
    try:
        assert await client.request("POST", "/v1/messages", b"{}", "application/json") == (
            200,
            b'{"n": 1}',
        )
        assert await client.json("GET", "/v1/inbox?max=1") == (200, {"n": 2})
        assert await client.json("POST", "/v1/inbox/read", {"reads": []}) == (200, {"n": 3})
    finally:
        await client.aclose()
        server.close()
    assert connections == 1
    assert seen == [
        ("POST /v1/messages HTTP/1.1", True, b"{}"),
        ("GET /v1/inbox?max=1 HTTP/1.1", True, b""),
        ("POST /v1/inbox/read HTTP/1.1", True, b'{"reads": []}'),
    ]


@pytest.mark.skipif(not CpuMeter.available(), reason="needs /proc")
def test_cpu_meter_counts_a_tree_with_ended_children() -> None:
    spin = "import time\nend = time.process_time() + 0.3\nwhile time.process_time() < end: pass"
    parent = subprocess.Popen(  # a parent that runs a busy child to its end, then waits
        [sys.executable, "-c", f"import subprocess, sys, time\n"
         f"subprocess.run([sys.executable, '-c', {spin!r}])\ntime.sleep(30)"],
    )  # fmt: skip
    try:
        meter = CpuMeter({"service": parent.pid, "gone": None})
        before = {"service": 0.0, "client": 0.0}
        deadline = 100
        while (after := meter.take())["service"] < 0.3 and deadline:
            deadline -= 1
            subprocess.run([sys.executable, "-c", "import time; time.sleep(0.1)"], check=True)
        assert after["service"] >= 0.3  # the child ended, its time went to the parent
        assert set(after) == {"service", "client"}
        per = CpuMeter.per_message(before, after, 10)
        assert per is not None
        assert per["service"] == round(after["service"] * 100, 3)
        assert per["total"] == round(per["service"] + per["client"], 3)
        assert CpuMeter.per_message(before, after, 0) is None
    finally:
        parent.kill()
        parent.wait()


def _steady(n: int, each: float = 0.001) -> list[tuple[float, float]]:
    return [(i * each, each) for i in range(n)]


def test_host_probe_finds_slow_stretches() -> None:
    pieces = _steady(1000)
    for i in (100, 101, 102, 600):  # one stretch of three slow pieces, and one alone
        pieces[i] = (pieces[i][0], 0.005)
    found = host.analyse(pieces)
    assert found.slow_windows == 2
    assert found.median_piece_ms == pytest.approx(1.0)
    assert found.slow_share == pytest.approx(0.020 / (0.996 + 0.020))
    assert found.longest_window_ms == pytest.approx(7.0)  # 100's start to 102's end
    assert host.analyse(_steady(50)).slow_windows == 0
    assert host.analyse([]).summary()["slow_windows_per_min"] is None


@given(st.lists(st.floats(0.0001, 0.05), min_size=1, max_size=300))
def test_host_probe_shares_and_windows_stay_in_bounds(durations: list[float]) -> None:
    starts = [sum(durations[:i]) for i in range(len(durations))]
    found = host.analyse(list(zip(starts, durations, strict=True)))
    slow = [d for d in durations if d > host.SLOW_FACTOR * found.median_piece_ms / 1000]
    assert 0.0 <= found.slow_share <= 1.0
    assert found.slow_windows <= len(slow)
    assert (found.slow_windows == 0) == (not slow)


def test_host_probe_runs_for_about_its_time() -> None:
    found = host.probe(0.3)
    assert 0.25 <= found.seconds <= 1.0
    assert found.median_piece_ms > 0


def test_gateway_errors_are_the_last_errors_with_their_traceback_ends(tmp_path: Path) -> None:
    log = tmp_path / "gateway.log"
    assert deploy.gateway_errors(log) == []  # the gateway never started
    lost = (
        "Traceback (most recent call last):\n  File x\n    raise exc\n"
        "psycopg.OperationalError: server closed the connection\n\tThis probably means\n"
    )
    entries = [
        {"level": "info", "msg": "GET /v1/inbox 200"},
        {"level": "error", "msg": "unhandled error in POST /v1/inbox/read", "exc": lost},
        {"level": "error", "msg": "unhandled error in GET /v1/inbox"},
        {"level": "warning", "msg": "discarding closed connection"},
        {"level": "error", "msg": "unhandled error in POST /v1/inbox/read", "exc": lost},
    ]
    lines = [json.dumps(entry) for entry in entries]
    log.write_text("\n".join(["not json", *lines, '"a string"']) + "\n")
    read = (
        "unhandled error in POST /v1/inbox/read | psycopg.OperationalError: server closed the"
        " connection This probably means"
    )
    assert deploy.gateway_errors(log) == ["unhandled error in GET /v1/inbox", read]
    assert deploy.gateway_errors(log, last=1) == [read]


class _Recorded:
    """A gateway's answers to the lone rounds' requests, each request and meter reading logged
    in turn."""

    def __init__(self, log: list[str]) -> None:
        self.log = log

    async def request(
        self, method: str, target: str, body: bytes = b"", content_type: str | None = None
    ) -> tuple[int, bytes]:
        kind = {"/v1/messages/batch": "send", "/v1/inbox/read": "read"}.get(target, "pull")
        self.log.append(kind)
        answer: dict[str, object] = {
            "send": {"results": [{"status": 202}]},
            "pull": {"deliveries": [{"msg_id": "msg_x"}]},
            "read": {"results": [{"msg_id": "msg_x", "result": "ok"}]},
        }[kind]
        return 200, json.dumps(answer).encode()


class _CountingMeter(CpuMeter):
    def __init__(self, log: list[str]) -> None:
        super().__init__({})
        self.log, self.seconds = log, 0.0

    def take(self) -> dict[str, float]:
        self.log.append("meter")
        self.seconds += 0.010
        return {"gateway": self.seconds}


async def test_lone_rounds_are_metered_first_then_timed_back_to_back() -> None:
    log: list[str] = []
    client = cast(http.Client, _Recorded(log))
    line = await lone_rounds(client, client, lambda n: b"{}", 3, _CountingMeter(log))
    metered = ["send", "meter", "pull", "meter", "read", "meter"]
    assert log == ["meter", *metered * 3, *["send", "pull", "read"] * 3]
    assert line["rounds"] == 3
    assert line["cpu_ms_per_request"]["send"] == {"gateway": 10.0}
    assert 0 < line["round_p50_ms"] <= line["round_p99_ms"]


async def test_a_failed_client_ends_the_run_at_once_naming_its_error() -> None:
    async def fails() -> None:
        raise ConnectionResetError("the gateway closed the socket")

    workers = [asyncio.create_task(fails()), asyncio.create_task(asyncio.sleep(60))]
    try:
        with pytest.raises(RuntimeError, match="ConnectionResetError: the gateway closed"):
            await runs._until(asyncio.Event(), workers, limit_s=120)
    finally:
        workers[1].cancel()
