"""``agentbus-gateway bench`` end to end on a small load, against the PostgreSQL server and
NATS it is given: a gateway process, two lanes, a few lone rounds, every message acked, every
line of the output, the payloads opened where the gateway was told to find them (the store, or
inline over the delivery WebSocket), and neither the bench database nor the bench tenant's
stream left behind, also when the command is stopped by SIGTERM in the middle of a run."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import nats
import psycopg
import pytest
from agentbus.bench import command as bench
from agentbus.bench import deploy
from agentbus.bench.runs import Result
from agentbus.gateway.config import GatewaySettings


async def _stream_names(nats_url: str) -> list[str]:
    nc = await nats.connect(nats_url)
    try:
        return [info.config.name or "" for info in await nc.jetstream().streams_info()]
    finally:
        await nc.close()


def _bench_databases(server_url: str) -> list[str]:
    with psycopg.connect(server_url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT datname FROM pg_database WHERE datname LIKE 'agentbus_bench_%'"
        ).fetchall()
    return [name for (name,) in rows]


async def test_bench_prints_every_line_and_leaves_nothing_behind(
    pg_admin_url: str, nats_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(bench, "HOST_PROBE_S", 0.2)
    streams_before = set(await _stream_names(nats_url))
    rows: list[dict[str, Any]] = []

    def run() -> None:
        bench.bench(
            40, 200, database_url=pg_admin_url, nats_url=nats_url, lanes=2, warmup=4, lone=5,
            policies="realistic", emit=rows.append,
        )  # fmt: skip

    await asyncio.to_thread(run)

    assert rows[0]["bench"] == "host"
    assert rows[0]["median_piece_ms"] > 0
    assert {row["analytics"] for row in rows} == {True}  # the default: chDB ingests beside
    lone = rows[1]
    assert (lone["mode"], lone["rounds"]) == ("lone", 5)
    assert 0 < lone["round_p50_ms"] <= lone["round_p99_ms"]
    assert set(lone["cpu_ms_per_request"]) == {"send", "pull", "read"}
    assert lone["cpu_ms_per_request"]["send"]["gateway"] >= 0
    runs = {
        (row["bench"], row["mode"]): row
        for row in rows
        if "bench" in row and row.get("mode") not in (None, "lone")
    }
    assert set(runs) == {
        ("gateway", "paced"),
        ("gateway", "unpaced"),
        ("nats", "paced"),
        ("nats", "unpaced"),
    }
    for row in runs.values():
        assert (row["acked"], row["errors"]) == (40, 0), row
        assert row.get("delivery") == ("long-poll" if row["bench"] == "gateway" else None)
        assert row.get("sends") == ("http" if row["bench"] == "gateway" else None)
        if row["bench"] == "gateway":
            assert (row["workers"], row["lanes"], row["payloads"]) == (1, 2, "store")
            assert row["policies"] == "realistic"  # its forbids refuse none of the messages
            opens = row["payload_opens"]  # a redelivery opens its payload again
            assert (opens["inline"], opens["store"] >= 40) == (0, True), opens
        assert row["msgs_per_sec"] > 0
        assert 0 < row["p50_ms"] <= row["p99_ms"] <= row["max_ms"]
        # each message reached its receiver before its read was answered
        assert 0 < row["delivered_p50_ms"] <= row["p50_ms"]
        assert row["delivered_p99_ms"] <= row["p99_ms"]
        assert (row.get("accepted_p50_ms", 0) > 0) == (row["bench"] == "gateway")
    gateway_cpu = runs[("gateway", "paced")]["cpu_ms_per_msg"]
    assert gateway_cpu["gateway"] > 0
    assert "nats" not in gateway_cpu  # not the bench's own NATS
    assert {row["beside"] for row in rows if "beside" in row} == {"paced", "unpaced"}
    assert list(rows[-1]["goals"]) == [
        "p50_ms<10@200/s", "p99_ms<50@200/s", "msgs_per_sec>=2000", "share_of_ceiling>=0.4",
        "cpu_ms_per_msg<=0.8",
    ]  # fmt: skip

    assert _bench_databases(pg_admin_url) == []
    assert set(await _stream_names(nats_url)) <= streams_before | {"AB_ADVISORIES", "SYS_AUDIT"}


async def test_bench_over_the_delivery_websocket(
    pg_admin_url: str, nats_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(bench, "HOST_PROBE_S", 0.2)
    rows: list[dict[str, Any]] = []

    def run() -> None:
        bench.bench(
            40, 200, database_url=pg_admin_url, nats_url=nats_url, lanes=2, warmup=4, raw=False,
            delivery="websocket", inline_payloads=True, emit=rows.append,
        )  # fmt: skip

    await asyncio.to_thread(run)

    runs = [row for row in rows if row.get("bench") == "gateway"]
    # the senders send as the sidecar does on its socket: send frames
    assert [(row["mode"], row["delivery"], row["sends"]) for row in runs] == [
        ("paced", "websocket", "websocket"),
        ("unpaced", "websocket", "websocket"),
    ]
    for row in runs:
        assert (row["acked"], row["errors"]) == (40, 0), row
        # the gateway opened every payload from its JetStream copy, none from the store
        opens = row["payload_opens"]
        assert (row["payloads"], opens["inline"] >= 40, opens["store"]) == ("inline", True, 0)
        assert 0 < row["p50_ms"] <= row["p99_ms"] <= row["max_ms"]
        # each message reached its receiver before its read was answered
        assert 0 < row["delivered_p50_ms"] <= row["p50_ms"]
        assert row["delivered_p99_ms"] <= row["p99_ms"]
        assert (row.get("accepted_p50_ms", 0) > 0) == (row["bench"] == "gateway")
    assert "goals" in rows[-1]
    assert _bench_databases(pg_admin_url) == []


def _run(rate: float | None, **figures: Any) -> dict[str, Any]:
    return {"rate": rate, "p50_ms": None, "p99_ms": None, "msgs_per_sec": None} | figures


def test_goals_name_the_bounds_of_the_rate_and_judge_each_figure() -> None:
    paced = _run(500.0, p50_ms=9.9, p99_ms=50.0)
    unpaced = _run(None, msgs_per_sec=2100.0, cpu_ms_per_msg={"total": 0.8})
    assert bench.goals(paced, unpaced, _run(None, msgs_per_sec=5000.0))["goals"] == {
        "p50_ms<10@500/s": True, "p99_ms<50@500/s": False, "msgs_per_sec>=2000": True,
        "share_of_ceiling>=0.4": True, "cpu_ms_per_msg<=0.8": True,
    }  # fmt: skip
    slow = _run(50.0, p50_ms=5.0, p99_ms=6.0)
    assert bench.goals(slow, _run(None, msgs_per_sec=900.0), _run(None, msgs_per_sec=2000.0))[
        "goals"
    ] == {
        "p50_ms<5@50/s": False, "msgs_per_sec>=2000": False, "share_of_ceiling>=0.4": True,
        "cpu_ms_per_msg<=0.8": False,
    }  # fmt: skip
    # no raw run: no share to judge; a run that measured nothing meets nothing
    assert bench.goals(_run(500.0), _run(None))["goals"] == {
        "p50_ms<10@500/s": False, "p99_ms<50@500/s": False, "msgs_per_sec>=2000": False,
        "cpu_ms_per_msg<=0.8": False,
    }  # fmt: skip


def test_a_run_names_what_its_errors_were() -> None:
    result = Result("gateway", "paced", 3, 500.0)
    assert "error_kinds" not in result.summary()
    for kind in ("send:AB-5001", "read:invalid", "send:AB-5001"):
        result.failed(kind)
    summary = result.summary()
    assert (summary["errors"], summary["error_kinds"]) == (
        3, {"send:AB-5001": 2, "read:invalid": 1}
    )  # fmt: skip


def test_bench_refuses_an_unknown_delivery() -> None:
    with pytest.raises(ValueError, match="long-poll, websocket"):
        bench.bench(1, 1, delivery="pigeon")
    with pytest.raises(ValueError, match="websocket with delivery websocket"):
        bench.bench(1, 1, sends="websocket")  # send frames need the socket


async def test_a_bench_stopped_by_sigterm_leaves_nothing_behind(
    pg_admin_url: str, nats_url: str, tmp_path: Path
) -> None:
    streams_before = set(await _stream_names(nats_url))
    command = [
        str(Path(sys.executable).parent / "agentbus-gateway"), "bench", "--messages", "100000",
        "--warmup", "0", "--no-raw", "--database-url", pg_admin_url, "--nats-url", nats_url,
    ]  # fmt: skip
    log = (tmp_path / "bench.log").open("wb")
    process = await asyncio.create_subprocess_exec(*command, stdout=subprocess.PIPE, stderr=log)
    try:
        assert process.stdout is not None
        first = await asyncio.wait_for(process.stdout.readline(), 120)
        assert json.loads(first)["bench"] == "host", (tmp_path / "bench.log").read_text()
        assert len(_bench_databases(pg_admin_url)) == 1  # the paced run is under way
        process.send_signal(signal.SIGTERM)
        await asyncio.wait_for(process.wait(), 60)
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
        log.close()
    assert process.returncode != 0
    assert _bench_databases(pg_admin_url) == []
    assert set(await _stream_names(nats_url)) <= streams_before | {"AB_ADVISORIES", "SYS_AUDIT"}


def test_the_gateway_runs_without_request_rates(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    dep = deploy.Deployment(tmp_path, "postgresql://db.invalid/x", "nats://nats.invalid:4222", 1)
    for name, value in dep.gateway_environment().items():
        if name.startswith("AGENTBUS_"):
            monkeypatch.setenv(name, value)
    assert GatewaySettings().request_rate_limits is False
