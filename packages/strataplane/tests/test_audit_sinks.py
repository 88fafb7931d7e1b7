"""Audit sinks: the chain streamed to a webhook and to syslog (RFC 5424 over UDP and TCP) on
loopback servers, at least once and in order, with retries, a visible backlog and the cursor
kept across a restart in the middle of a delivery; the webhook credential is never shown."""

from __future__ import annotations

import asyncio
import json
import os
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from fastapi import FastAPI
from platformkit.http import Server, start_server
from platformkit.testing.services import free_port
from strataplane.actions import audit_sinks, teams, tokens
from strataplane.actions.context import Ctx, Services
from strataplane.controllers.audit_sinks import AuditExporter
from strataplane.testing import Seed, client_for

CREDENTIAL = "Bearer hook-credential-value"


@dataclass
class Hook:
    url: str
    received: list[dict[str, Any]] = field(default_factory=list)
    authorizations: list[str | None] = field(default_factory=list)
    fail: int = 0  # answer 500 to this many requests first
    hold: threading.Event | None = None  # block the request after ``hold_after`` ones
    hold_after: int = 0
    requests: int = 0

    @property
    def seqs(self) -> list[int]:
        return [e["seq"] for body in self.received for e in body["events"]]


@pytest.fixture
def hook() -> Iterator[Hook]:
    state = Hook("")

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"]))
            state.requests += 1
            if state.hold is not None and state.requests > state.hold_after:
                state.hold.wait(30)
                self.send_response(503)
                self.end_headers()
                return
            if state.fail > 0:
                state.fail -= 1
                self.send_response(500)
                self.end_headers()
                return
            state.received.append(json.loads(body))
            state.authorizations.append(self.headers.get("Authorization"))
            self.send_response(204)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    state.url = f"http://127.0.0.1:{server.server_address[1]}/audit"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield state
    if state.hold is not None:
        state.hold.set()
    server.shutdown()
    server.server_close()


async def _tenant(seed: Seed, events: int) -> Ctx:
    tenant, admin = await seed.tenant()
    ctx = seed.ctx(admin, tenant.id)
    for n in range(events):
        await teams.create_team(ctx, f"team-{n}", f"Team {n}")
    return ctx


def _exporter_of(services: Services, batch: int = 2) -> AuditExporter:
    from strataplane.actions.secrets import keyring

    return AuditExporter(services.pool, lambda: keyring(services), batch=batch, timeout=5)


async def test_webhook_retries_then_delivers_everything_in_order(sp_seed: Seed, hook: Hook) -> None:
    ctx = await _tenant(sp_seed, 5)
    sink = await audit_sinks.create_sink(
        ctx, "webhook", {"url": hook.url}, credential=CREDENTIAL, start=1
    )
    exporter = _exporter_of(sp_seed.services)
    hook.fail = 1
    assert await exporter.run_once() == 0  # the first attempt fails; the cursor stays
    state = await audit_sinks.access_sink(ctx, sink.id)
    assert state.sink.last_error == "webhook answered HTTP 500"
    assert state.sink.cursor_seq == 0
    assert state.backlog >= 6  # 5 teams and the sink's own event, at least
    await exporter.run_once()
    state = await audit_sinks.access_sink(ctx, sink.id)
    assert (state.backlog, state.sink.last_error) == (0, None)
    assert hook.seqs == list(range(1, state.sink.cursor_seq + 1))
    assert set(hook.authorizations) == {CREDENTIAL}
    assert hook.received[0]["events"][0]["hash"]
    # the new events of later actions follow
    await teams.create_team(ctx, "late", "Late")
    await exporter.run_once()
    assert hook.seqs == list(range(1, hook.seqs[-1] + 1))
    assert hook.received[-1]["events"][-1]["action"] == "team.create"


async def test_a_restart_in_the_middle_of_a_delivery_loses_nothing(
    sp_seed: Seed, hook: Hook
) -> None:
    ctx = await _tenant(sp_seed, 6)
    sink = await audit_sinks.create_sink(ctx, "webhook", {"url": hook.url}, start=1)
    hook.hold, hook.hold_after = threading.Event(), 1  # the second batch hangs
    first = _exporter_of(sp_seed.services)
    running = asyncio.create_task(first.run_once())
    for _ in range(600):
        if hook.requests >= 2:
            break
        await asyncio.sleep(0.05)
    assert hook.requests >= 2
    running.cancel()  # the process dies while the second batch is in flight
    await asyncio.gather(running, return_exceptions=True)
    assert hook.seqs == [1, 2]
    assert (await audit_sinks.access_sink(ctx, sink.id)).sink.cursor_seq == 2
    hook.hold.set()
    hook.hold = None
    second = _exporter_of(sp_seed.services)  # a new process, from the stored cursor
    await second.run_once()
    state = await audit_sinks.access_sink(ctx, sink.id)
    assert state.backlog == 0
    assert hook.seqs == list(range(1, state.sink.cursor_seq + 1))


class _Udp(asyncio.DatagramProtocol):
    def __init__(self) -> None:
        self.messages: list[bytes] = []

    def datagram_received(self, data: bytes, addr: object) -> None:
        self.messages.append(data)


async def test_syslog_over_udp_and_tcp(sp_seed: Seed) -> None:
    loop = asyncio.get_running_loop()
    udp = _Udp()
    transport, _ = await loop.create_datagram_endpoint(lambda: udp, local_addr=("127.0.0.1", 0))
    udp_port = transport.get_extra_info("sockname")[1]
    tcp_frames: list[bytes] = []

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            length = await reader.readuntil(b" ") if not reader.at_eof() else b""
            if not length:
                break
            tcp_frames.append(await reader.readexactly(int(length[:-1])))
        writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    tcp_port = server.sockets[0].getsockname()[1]
    try:
        ctx = await _tenant(sp_seed, 3)
        for transport_name, port in (("udp", udp_port), ("tcp", tcp_port)):
            config = {"address": f"127.0.0.1:{port}", "transport": transport_name}
            await audit_sinks.create_sink(ctx, "syslog", config, start=1)
        await _exporter_of(sp_seed.services, batch=50).run_once()
        for _ in range(100):
            if len(udp.messages) >= 4 and len(tcp_frames) >= 4:
                break
            await asyncio.sleep(0.05)
    finally:
        transport.close()
        server.close()
    for messages in (udp.messages, tcp_frames):
        first = messages[0]
        header, _, body = first.partition(b" \xef\xbb\xbf")
        assert header.startswith(b"<110>1 ")
        assert b" strataplane - tenant.create " in header or b" team.create " in header
        assert b'[audit@32473 tenant="' in header
        assert b'seq="1"]' in header
        assert json.loads(body)["seq"] == 1
        seqs = [json.loads(m.partition(b" \xef\xbb\xbf")[2])["seq"] for m in messages]
        assert seqs[:4] == [1, 2, 3, 4]


async def test_api_never_shows_the_credential_and_isolates_tenants(sp_app: FastAPI) -> None:
    seed = Seed(sp_app.state.services)
    found = []
    for _ in range(2):
        tenant, admin = await seed.tenant()
        found.append((await tokens.create_token(seed.ctx(admin, tenant.id), "t")).plaintext)
    mine, theirs = found
    body = {"kind": "webhook", "config": {"url": "https://siem.example.com/in"}}
    async with client_for(sp_app, mine) as http:
        made = await http.post("/api/v1/audit-sinks", json={**body, "credential": CREDENTIAL})
        listed = await http.get("/api/v1/audit-sinks")
        events = await http.get("/api/v1/audit/events")
        bad = [
            await http.post("/api/v1/audit-sinks", json={**body, "config": {"url": "ftp://x"}}),
            await http.post("/api/v1/audit-sinks", json={**body, "start": 2**70}),
            await http.post(
                "/api/v1/audit-sinks", json={"kind": "syslog", "config": {"address": "a\u0000"}}
            ),
            await http.post("/api/v1/audit-sinks", json={**body, "config": {"url": "x" * 3000}}),
            await http.post(
                "/api/v1/audit-sinks",
                json={"kind": "syslog", "config": {"address": "h:1", "tls": True}},
            ),
        ]
    assert made.status_code == 201, made.text
    sink = made.json()
    assert sink["has_credential"] is True
    assert sink["backlog"] == 1  # its own creation event, the first it exports
    assert [s["id"] for s in listed.json()] == [sink["id"]]
    for answer in (made, listed, events):
        assert "hook-credential-value" not in answer.text
    assert [b.status_code for b in bad] == [422] * len(bad)
    async with client_for(sp_app, theirs) as http:
        assert (await http.get(f"/api/v1/audit-sinks/{sink['id']}")).status_code == 404
        assert (await http.delete(f"/api/v1/audit-sinks/{sink['id']}")).status_code == 404
        assert (await http.get("/api/v1/audit-sinks")).json() == []


def _served(url: str, port: int) -> Server:
    env = {
        "STRATAPLANE_DATABASE_URL": url,
        "STRATAPLANE_SHARDS": "2",
        "STRATAPLANE_AUDIT_EXPORT_INTERVAL": "0.2",
        "STRATAPLANE_AUDIT_EXPORT_BATCH": "2",
    }
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        server = start_server(
            "strataplane.app:create_app", port=port, factory=True, log_level="warning"
        )
        server.wait_ready(60)
        return server
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


async def test_a_killed_server_resumes_the_export_without_a_gap(
    strataplane_database: str, sp_seed: Seed, hook: Hook
) -> None:
    ctx = await _tenant(sp_seed, 6)
    hook.hold, hook.hold_after = threading.Event(), 1  # the second batch hangs
    await audit_sinks.create_sink(ctx, "webhook", {"url": hook.url}, start=1)
    port = free_port()
    server = _served(strataplane_database, port)
    try:
        for _ in range(1200):
            if hook.requests >= 2:
                break
            await asyncio.sleep(0.05)
        assert hook.requests >= 2
        server.kill()  # SIGKILL while the second batch is in flight
        server.wait()
    finally:
        server.stop()
    delivered = list(hook.seqs)
    hook.hold.set()
    hook.hold = None
    server = _served(strataplane_database, port)
    try:
        sinks = await audit_sinks.list_sinks(ctx)
        for _ in range(1200):
            sinks = await audit_sinks.list_sinks(ctx)
            if sinks[0].backlog == 0:
                break
            await asyncio.sleep(0.05)
        assert sinks[0].backlog == 0
    finally:
        server.stop()
    assert delivered == list(range(1, len(delivered) + 1))
    assert sorted(set(hook.seqs)) == list(range(1, sinks[0].sink.cursor_seq + 1))
    assert hook.seqs == sorted(hook.seqs)  # in order; a resent batch repeats, never skips


async def test_changing_the_credential_keeps_the_cursor(sp_seed: Seed, hook: Hook) -> None:
    ctx = await _tenant(sp_seed, 2)
    sink = await audit_sinks.create_sink(
        ctx, "webhook", {"url": hook.url}, credential="Bearer old", start=1
    )
    exporter = _exporter_of(sp_seed.services, batch=50)
    await exporter.run_once()
    sent = len(hook.seqs)
    updated = await audit_sinks.update_sink(ctx, sink.id, credential="Bearer new")
    assert updated.cursor_seq == sent
    await exporter.run_once()
    assert hook.seqs == list(range(1, len(hook.seqs) + 1))  # nothing resent, nothing skipped
    assert len(hook.seqs) == sent + 1  # the update's own event
    assert hook.authorizations == ["Bearer old", "Bearer new"]
    cleared = await audit_sinks.update_sink(ctx, sink.id, clear_credential=True)
    assert cleared.credential_id is None
