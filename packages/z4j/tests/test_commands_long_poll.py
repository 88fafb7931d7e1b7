"""Commands over long poll: our agent's HTTP transport and the z4j-celery agent's long-poll
transport, against one brain and behind a load balancer that spreads every request over two
brains on one database without sticky routing."""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from platformkit.testing.services import free_port
from z4j.testing import BrainProcess, wait_for

from .command_stack import (
    admin_brain,
    check_cancel,
    check_retry,
    command_stack,
    signed_in,
)

pytestmark = pytest.mark.long_module  # minutes: run first (platformkit.testing.plugin)

__all__ = ["admin_brain"]  # the module's brain, a fixture


@pytest.mark.timeout(180)
@pytest.mark.parametrize("agent", ["ours-http", "z4j-celery-longpoll"])
async def test_retry_and_cancel_over_long_poll(
    admin_brain: BrainProcess, tmp_path: Path, agent: str
) -> None:
    async with command_stack(admin_brain, agent, "redis", tmp_path) as stack:
        await check_retry(stack)
        if agent == "ours-http":
            await check_cancel(stack)
            return
        # The z4j-celery long-poll transport sends no hello: it attests only its retry
        # contract, so an agent that never said hello is offered retry alone.
        cur = await stack.db.execute(
            "SELECT capabilities FROM agents WHERE id = %s", (stack.creds["agent_id"],)
        )
        assert (await cur.fetchone() or {})["capabilities"] == {"celery": ["retry_task"]}
        task = await stack.task(stack.app.send_task("cmd.add", (1, 1)).id, "succeeded")
        refused = await stack.api.post(f"/projects/{stack.project}/tasks/{task['id']}/cancel")
        assert refused.status_code == 409
        assert refused.json()["code"] == "command.not_offered"


@dataclass
class Hop:
    """One request the proxy passed on: to which brain, in which session, carrying which
    command frames back."""

    method: str
    path: str
    backend: int
    session: str
    status: int
    command_ids: list[str]


class RoundRobin:
    """A load balancer on loopback without sticky routing: each HTTP/1.1 request (not each
    connection) goes to the next brain in turn, with one turn per route, so consecutive polls
    (and consecutive posts) of an agent always land on different brains. It records every
    request and knows which brains hold a command long poll open."""

    def __init__(self, backends: list[str]) -> None:
        self.backends = backends
        self.turns: dict[str, int] = {}
        self.hops: list[Hop] = []
        # open command polls that claim (not the z4j-celery probe): id -> (brain, opened at)
        self.polls: dict[int, tuple[int, float]] = {}
        self.port = free_port()
        self.client = httpx.AsyncClient(timeout=120)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def __aenter__(self) -> RoundRobin:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", self.port)
        return self

    async def __aexit__(self, *_: object) -> None:
        self.server.close()
        await self.client.aclose()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while await self._one(reader, writer):
                pass
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    async def _one(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        head = await reader.readuntil(b"\r\n\r\n")
        line, *fields = head.decode("latin-1").split("\r\n")[:-2]
        method, target, _ = line.split(" ", 2)
        headers = [tuple(f.split(":", 1)) for f in fields]
        named = {k.strip().lower(): v.strip() for k, v in headers}
        body = await reader.readexactly(int(named.get("content-length", "0")))
        route = target.split("?")[0]
        backend = self.turns.get(route, 0) % len(self.backends)
        self.turns[route] = backend + 1
        poll = route == "/api/v1/agent/commands"
        if poll and "max_frames=0" not in target:
            self.polls[id(reader)] = (backend, time.monotonic())
        try:
            answer = await self.client.request(
                method, self.backends[backend] + target, content=body,
                headers={k.strip(): v.strip() for k, v in headers
                         if k.strip().lower() not in ("host", "connection", "content-length")},
            )  # fmt: skip
        finally:
            self.polls.pop(id(reader), None)
        ids = []
        if poll and answer.status_code == 200:
            for frame in answer.json().get("frames", []):
                ids.append((json.loads(frame) if isinstance(frame, str) else frame)["id"])
        session = named.get("x-z4j-session") or named.get("x-z4j-session-nonce", "")
        self.hops.append(Hop(method, route, backend, session,
                             answer.status_code, ids))  # fmt: skip
        keep = named.get("connection", "").lower() != "close"
        reply = [f"HTTP/1.1 {answer.status_code} {answer.reason_phrase}"]
        reply += [f"{k}: {v}" for k, v in answer.headers.items()
                  if k.lower() not in ("content-length", "connection", "transfer-encoding",
                                       "content-encoding")]  # fmt: skip
        reply += [f"content-length: {len(answer.content)}",
                  f"connection: {'keep-alive' if keep else 'close'}"]  # fmt: skip
        writer.write(("\r\n".join(reply) + "\r\n\r\n").encode("latin-1") + answer.content)
        await writer.drain()
        return keep

    async def poll_open_on(self, backend: int | None = None) -> int:
        """The brain that holds a command long poll open (``backend`` if given), once one has
        been open for under 10 s: both agents wait 30 s, so it is still open when a command
        issued now is queued."""

        async def holder() -> int | None:
            for i, opened in self.polls.values():
                if backend in (None, i) and time.monotonic() - opened < 10:
                    return i + 1
            return None

        found = await wait_for(holder, within=120, interval=0.05)
        assert found is not None, (self.polls, self.hops[-10:])
        return int(found) - 1


@pytest.mark.timeout(420)
@pytest.mark.parametrize("agent", ["z4j-celery-longpoll", "ours-http"])
async def test_long_poll_agents_behind_two_brains_without_sticky_routing(
    admin_brain: BrainProcess, tmp_path: Path, agent: str
) -> None:
    """Every request of the agent goes to the next of two brains in turn. Events arrive, and
    each command is issued through the brain that does NOT hold the agent's open poll, so it is
    delivered through the other one; the agent keeps one session throughout, so the frames
    both brains signed passed its strictly-increasing sequence check."""
    second = BrainProcess(
        admin_brain.admin_url, admin_brain.config_dir, free_port(), tmp_path / "brain2.log"
    )
    second.start()
    brains = [admin_brain, second]
    try:
        async with (
            RoundRobin([b.url for b in brains]) as proxy,
            command_stack(admin_brain, agent, "redis", tmp_path, agent_url=proxy.url) as stack,
            signed_in(second.url) as second_api,
        ):
            apis = [stack.api, second_api]
            engine_ids = [stack.app.send_task("cmd.add", (i, 40)).id for i in range(2)]
            originals = [await stack.task(e, "succeeded") for e in engine_ids]
            delivered_by = []
            for n, original in enumerate(originals):
                # The first command goes through whichever brain holds no poll; the second
                # waits for a poll on the other brain, so both brains sign a command frame.
                holder = await proxy.poll_open_on(None if n == 0 else 1 - delivered_by[0])
                done = await stack.command(f"tasks/{original['id']}/retry", {}, apis[1 - holder])
                assert done["status"] == "succeeded", (done["error"], stack.logs())
                await stack.task(done["result"]["new_task_id"], "succeeded")
                (hop,) = [h for h in proxy.hops if done["id"] in h.command_ids]
                assert hop.backend == holder
                delivered_by.append(hop.backend)
            assert sorted(delivered_by) == [0, 1]
            if agent == "ours-http":
                running = stack.app.send_task("cmd.sleep", (120,)).id
                started = await stack.task(running, "started")
                holder = await proxy.poll_open_on()
                body = {"terminate": True}
                done = await stack.command(f"tasks/{started['id']}/cancel", body, apis[1 - holder])
                assert done["status"] == "succeeded", (done["error"], stack.logs())
                await stack.task(running, "cancelled")
            posts = {h.backend for h in proxy.hops if h.path == "/api/v1/agent/events"}
            assert posts == {0, 1}, proxy.hops
            assert all(h.status < 400 for h in proxy.hops), [h for h in proxy.hops
                                                            if h.status >= 400]  # fmt: skip
            sessions = {h.session for h in proxy.hops if h.path != "/api/v1/agent/hello"}
            assert len(sessions) == 1, f"the agent had to reconnect: {proxy.hops}"
    finally:
        second.stop()
