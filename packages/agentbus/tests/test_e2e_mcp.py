"""End to end: ``agentbus mcp serve`` as the real child process a harness starts, driven by the
official ``mcp`` client SDK over stdio and streamable HTTP, and by the MCP inspector's CLI from
npm; alice and bob each talk to the bus only through their own MCP server, which runs the
sidecar loop inside (no ``agentbus sidecar run`` beside it)."""

from __future__ import annotations

import asyncio
import json
import subprocess
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import httpx2
import pytest
from agentbus.e2e import BIN, Sidecar, World, stop_process, until
from agentbus.e2e_harnesses import inspector_cli
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from platformkit.testing.services import free_port

pytestmark = pytest.mark.timeout(300)

TOOLS = {
    "whoami", "send", "inbox", "read", "ack", "reply", "wait_reply", "task_request",
    "task_accept", "task_reject", "task_progress", "task_complete", "task_fail", "task_cancel",
    "task_show", "task_list", "task_wait", "agents", "trace",
}  # fmt: skip


def stdio_params(sidecar: Sidecar) -> StdioServerParameters:
    return StdioServerParameters(
        command=str(BIN / "agentbus"), args=["mcp", "serve"], env=sidecar.env
    )


@asynccontextmanager
async def mcp_of(sidecar: Sidecar) -> AsyncIterator[Client]:
    async with Client(stdio_params(sidecar), read_timeout_seconds=120) as client:
        yield client


async def call(client: Client, tool: str, **arguments: Any) -> dict[str, Any]:
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, (tool, result.content)
    assert result.structured_content is not None, result
    return result.structured_content


async def test_two_agents_through_their_mcp_servers(pair: World) -> None:
    alice, bob = pair.alice, pair.bob
    async with mcp_of(alice) as a, mcp_of(bob) as b:
        listed = {tool.name for tool in (await a.list_tools()).tools}
        assert listed >= TOOLS, TOOLS - listed
        assert (await call(a, "whoami"))["address"] == alice.address

        sent = await call(a, "send", to=bob.address, text="hello bob", title="greeting")
        assert sent["state"] == "sent", sent
        waited = await call(b, "inbox", wait_s=60)
        assert [m["msg_id"] for m in waited["messages"]] == [sent["msg_id"]], waited
        resource = await b.read_resource(f"agentbus://inbox/{sent['msg_id']}")
        assert json.loads(resource.contents[0].text)["data"]["text"] == "hello bob"  # type: ignore[union-attr]
        shown = await call(b, "read", msg_id=sent["msg_id"])
        assert (shown["acked"], shown["envelope"]["data"]["text"]) == (True, "hello bob")
        answer = await call(b, "reply", msg_id=sent["msg_id"], text="hello alice")
        assert answer["state"] == "sent", answer
        got = await call(a, "wait_reply", msg_id=sent["msg_id"], timeout_s=60)
        assert got["envelope"]["data"]["text"] == "hello alice", got
        traced = await call(a, "trace", msg_id=sent["msg_id"])
        assert traced["remote"]["events"][0]["event"] == "message.accepted", traced

        found = await call(a, "agents", capability="code.review")
        assert [x["address"] for x in found["agents"]] == [bob.address], found
        asked = await call(
            a, "task_request", to=bob.address, capability="code.review",
            instructions="review the patch",
        )  # fmt: skip
        task_id = asked["task_id"]

        async def request_at_bob() -> list[dict[str, Any]]:
            messages = (await call(b, "inbox"))["messages"]
            return [m for m in messages if m["subject"] == task_id]

        await until(request_at_bob, 30, "the task request at bob")
        waiting = asyncio.create_task(call(a, "task_wait", task_id=task_id, timeout_s=60))
        await call(b, "task_accept", task_id=task_id, note="on it")
        await call(b, "task_progress", task_id=task_id, message="half way", percent=50)
        await call(b, "task_complete", task_id=task_id, summary="looks good")
        ended = await waiting
        assert (ended["outcome"], ended["task"]["state"]) == ("ended", "completed"), ended
        # the recipient cannot cancel: the refusal is a tool error with its AB- code
        refused = await b.call_tool("task_cancel", {"task_id": task_id})
        assert refused.is_error
        assert "AB-6005" in refused.content[0].text  # type: ignore[union-attr]
        unknown = await a.call_tool("send", {"to": "agent://acme/main/nobody-here", "text": "x"})
        assert unknown.is_error
        assert "AB-3002" in unknown.content[0].text, unknown.content  # type: ignore[union-attr]


async def test_local_tool_calls_are_fast(pair: World) -> None:
    """``agentbus mcp bench``: p50 of a tool answered from the local store, through the real
    client over stdio."""
    process = await asyncio.create_subprocess_exec(
        str(BIN / "agentbus"), "mcp", "bench", "--calls", "200", "--json",
        env=pair.alice.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(process.communicate(), 120)
    assert process.returncode == 0, err.decode()
    result = json.loads(out)
    assert result["calls"] == 200
    assert result["p50_ms"] < 20, result


@asynccontextmanager
async def http_server(sidecar: Sidecar) -> AsyncIterator[tuple[str, str]]:
    """``agentbus mcp serve --transport http`` on a free port; its URL and bearer token."""
    port = free_port()
    log = (sidecar.home / "mcp-http.log").open("ab")
    process = await asyncio.create_subprocess_exec(
        str(BIN / "agentbus"), "mcp", "serve", "--transport", "http", "--port", str(port),
        env=sidecar.env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip
    log.close()
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        async with httpx.AsyncClient() as probe:

            async def listening() -> bool:
                assert process.returncode is None, (sidecar.home / "mcp-http.log").read_text()
                try:
                    return (await probe.post(url, json={})).status_code == 401
                except httpx.TransportError:
                    return False

            await until(listening, 60, "the MCP server's HTTP port")
        token_file = sidecar.state_db.parent / "mcp-http.token"
        yield url, token_file.read_text().strip()
    finally:
        await stop_process(process)


async def test_streamable_http_needs_the_agents_token(pair: World) -> None:
    async with http_server(pair.alice) as (url, token):
        async with httpx.AsyncClient() as plain:
            refused = await plain.post(url, json={}, headers={"Authorization": "Bearer nope"})
        assert refused.status_code == 401
        assert refused.headers["content-type"] == "application/problem+json"
        headers = {"Authorization": f"Bearer {token}"}
        async with (
            httpx2.AsyncClient(headers=headers, timeout=60) as http,
            Client(streamable_http_client(url, http_client=http)) as client,
        ):
            me = await call(client, "whoami")
            assert me["address"] == pair.alice.address
            sent = await call(client, "send", to=pair.bob.address, text="over http")
            assert sent["state"] == "sent", sent


def inspector(*args: str) -> Any:
    """``mcp-inspector-cli --cli ...``, answering JSON. It is run from its own build folder: it
    finds its package.json by a path relative to the working directory."""
    entry = inspector_cli()
    result = subprocess.run(
        ["node", str(entry.parent / "cli.js"), "--cli", *args],
        capture_output=True, text=True, timeout=120, cwd=entry.parent,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    return json.loads(result.stdout)


async def test_the_mcp_inspector_lists_and_calls_our_tools(pair: World) -> None:
    alice = pair.alice
    serve = [str(BIN / "agentbus"), "mcp", "serve"]
    env = [
        "-e", f"AGENTBUS_CREDENTIALS={alice.credentials}",
        "-e", f"AGENTBUS_STATE_DIR={alice.state_dir}",
    ]  # fmt: skip
    listed = await asyncio.to_thread(inspector, *env, *serve, "--method", "tools/list")
    assert {tool["name"] for tool in listed["tools"]} >= TOOLS
    called = await asyncio.to_thread(
        inspector, *env, *serve, "--method", "tools/call", "--tool-name", "send",
        "--tool-arg", f"to={pair.bob.address}", "text=from the inspector",
    )  # fmt: skip
    assert not called.get("isError"), called
    assert called["structuredContent"]["state"] == "sent", called
    async with http_server(alice) as (url, token):
        over_http = await asyncio.to_thread(
            inspector, url, "--transport", "http", "--header", f"Authorization: Bearer {token}",
            "--method", "tools/call", "--tool-name", "whoami",
        )  # fmt: skip
    assert over_http["structuredContent"]["address"] == alice.address, over_http
