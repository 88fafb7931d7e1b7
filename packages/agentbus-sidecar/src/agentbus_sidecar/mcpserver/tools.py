"""The MCP tools and resources: every one calls the same action as the CLI command of the same
name, on one ``Runtime`` opened for the server's life (one state.db connection, one gateway
client with its connection pool and agent credential).

A failure the agent can act on comes back as an MCP tool error (``isError``) whose text starts
with the AB- code when there is one (``AB-3002 unknown_recipient: ...``); an unreachable
gateway is not a failure of a send, which stays queued (``state: queued``).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable
from datetime import timedelta
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ResourceNotFoundError, ToolError

from agentbus_sidecar.actions.reply_wait import wait_for_reply
from agentbus_sidecar.actions.sending import SendOutcome, ack_messages, reply_message, send_message
from agentbus_sidecar.actions.task_wait import wait_for_task
from agentbus_sidecar.actions.tasks import request_task, update_task
from agentbus_sidecar.actions.tracing import trace_message
from agentbus_sidecar.addresses import normalize_input
from agentbus_sidecar.cli.render import inbox_item
from agentbus_sidecar.clock import server_now, utcnow
from agentbus_sidecar.errors import GatewayError, SidecarError
from agentbus_sidecar.runtime import Runtime
from agentbus_sidecar.store import inbox, outbox, state_db_path

__all__ = ["INSTRUCTIONS", "build_server"]

WAIT_MAX_S = 600
WATCH_S = 0.2

INSTRUCTIONS = (
    "AgentBus connects you with other coding agents. Your address is {address}. "
    "Check `inbox` for messages and task requests, `read` one to see it in full (this marks it "
    "read), answer with `reply`, and hand work to another agent with `task_request` "
    "(find agents with `agents`). When you were asked to do a task: `task_accept`, then "
    "`task_progress` as you go, and `task_complete` or `task_fail`."
)


def tool_error(exc: SidecarError) -> ToolError:
    """The model-facing text of a failure: the AB- code first when the gateway gave one."""
    if isinstance(exc, GatewayError):
        code = " ".join(p for p in (exc.code, exc.name) if p) or f"HTTP {exc.status}"
        return ToolError(f"{code}: {exc.detail}" if exc.detail else code)
    return ToolError(str(exc))


def outcome_result(outcome: SendOutcome) -> dict[str, Any]:
    """A send's answer; refused for good (parked with its AB- code) is a tool error."""
    if outcome.state == "failed":
        raise ToolError(f"{outcome.detail} ({outcome.envelope['id']} was not sent)")
    answer = outcome.as_dict()
    if outcome.task_id is not None:
        answer["task_id"] = outcome.task_id
    return answer


def _clean(data: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in data.items() if v is not None}


def _expiry(seconds: int | None) -> Any:
    return server_now() + timedelta(seconds=seconds) if seconds else None


def build_server(rt: Runtime, state_dir: Any = None) -> MCPServer[Any]:
    """The server for the agent of ``rt``; ``state_dir`` as given to ``open_runtime``."""
    state_db = state_db_path(rt.agent_id, state_dir)
    server: MCPServer[Any] = MCPServer(
        name="agentbus",
        title="AgentBus",
        instructions=INSTRUCTIONS.format(address=rt.address),
        version="0.1.0",
        log_level="WARNING",
    )

    async def guarded[T](work: Awaitable[T]) -> T:
        try:
            return await work
        except SidecarError as exc:
            raise tool_error(exc) from exc
        except ValueError as exc:  # a malformed address or id
            raise ToolError(str(exc)) from exc

    def unread() -> list[dict[str, Any]]:
        inbox.present(rt.conn, utcnow())
        return [inbox_item(row) for row in inbox.list_messages(rt.conn)]

    @server.tool()
    async def whoami() -> dict[str, Any]:
        """This agent's address and id, and how many messages are unread."""
        return {
            "address": rt.address,
            "agent_id": rt.agent_id,
            "gateway": rt.creds.gateway_url,
            "unread": inbox.unread_count(rt.conn),
            "queued_sends": len(outbox.pending_sends(rt.conn)),
        }

    @server.tool()
    async def send(
        to: str,
        text: str,
        title: str | None = None,
        conversation: str | None = None,
        priority: str = "normal",
        expires_in_s: int | None = None,
    ) -> dict[str, Any]:
        """Send a message to another agent (agent://tenant/workspace/name, or just its name in
        this workspace). Offline it is queued and goes out later (state: queued)."""
        data = _clean({"text": text, "title": title})
        outcome = await guarded(
            send_message(
                rt,
                normalize_input(to),
                data,
                conversation=conversation,
                priority=priority,
                expires=_expiry(expires_in_s),
            )
        )
        return outcome_result(outcome)

    @server.tool(name="inbox")
    async def inbox_tool(include_read: bool = False, wait_s: int = 0) -> dict[str, Any]:
        """Unread messages and task requests, oldest first. With wait_s, wait up to that many
        seconds for one to arrive when none is there."""
        rows = unread() if not include_read else []
        deadline = time.monotonic() + min(max(wait_s, 0), WAIT_MAX_S)
        while not include_read and not rows and time.monotonic() < deadline:
            await asyncio.sleep(WATCH_S)
            rows = unread()
        if include_read:
            inbox.present(rt.conn, utcnow())
            rows = [inbox_item(r) for r in inbox.list_messages(rt.conn, include_read=True)]
        return {"messages": rows}

    @server.tool()
    async def read(msg_id: str, ack: bool = True) -> dict[str, Any]:
        """One message in full; a received one is marked read unless ack is false."""
        row = inbox.get(rt.conn, msg_id)
        if row is not None and row["transport_acked"]:
            acked = False if not ack else (await guarded(ack_messages(rt, [msg_id])))[msg_id]
            return {"envelope": inbox.envelope_of(row), "acked": acked}
        if (queued := outbox.queued_envelope(rt.conn, msg_id)) is not None:
            return {"envelope": queued, "acked": False}
        remote = await guarded(rt.session.call(rt.client.get_message, msg_id, True))
        return {"envelope": remote.get("envelope") or remote, "acked": False}

    @server.tool(name="ack")
    async def ack_tool(msg_ids: list[str]) -> dict[str, Any]:
        """Mark messages read (handled) without showing them."""
        return {"acked": await guarded(ack_messages(rt, msg_ids))}

    @server.tool()
    async def reply(msg_id: str, text: str, title: str | None = None) -> dict[str, Any]:
        """Answer a message in its conversation (to its replyto, else its sender)."""
        data = _clean({"text": text, "title": title})
        return outcome_result(await guarded(reply_message(rt, msg_id, data)))

    @server.tool()
    async def wait_reply(msg_id: str, timeout_s: int = 120, ack: bool = True) -> dict[str, Any]:
        """Wait for the answer to a message this agent sent; marked read unless ack is false."""
        found = await guarded(wait_for_reply(rt, msg_id, min(timeout_s, WAIT_MAX_S), state_db))
        envelope, acked = found.envelope, False
        if envelope is not None and ack:
            acked = (await guarded(ack_messages(rt, [envelope["id"]])))[envelope["id"]]
        return {
            "in_reply_to": msg_id,
            "envelope": envelope,
            "acked": acked,
            "timed_out": envelope is None,
            "waited_s": round(found.waited_s, 3),
        }

    @server.tool()
    async def task_request(
        to: str,
        capability: str,
        instructions: str,
        title: str | None = None,
        input: dict[str, Any] | None = None,
        budget_usd: str | None = None,
        idempotency_key: str | None = None,
        conversation: str | None = None,
    ) -> dict[str, Any]:
        """Ask another agent to do work for a capability it offers; answers the task id."""
        data = _clean(
            {
                "instructions": instructions,
                "title": title,
                "input": input,
                "budget": {"currency": "USD", "max": budget_usd} if budget_usd else None,
            }
        )
        outcome = await guarded(
            request_task(
                rt,
                normalize_input(to),
                data,
                capability=capability,
                idempotency_key=idempotency_key,
                conversation=conversation,
            )
        )
        return outcome_result(outcome)

    async def lifecycle(task_id: str, verb: str, data: dict[str, Any]) -> dict[str, Any]:
        return outcome_result(await guarded(update_task(rt, task_id, verb, _clean(data))))

    @server.tool()
    async def task_accept(
        task_id: str, note: str | None = None, eta: str | None = None
    ) -> dict[str, Any]:
        """Take on a task you were asked to do."""
        return await lifecycle(task_id, "accept", {"note": note, "eta": eta})

    @server.tool()
    async def task_reject(
        task_id: str, message: str | None = None, code: str = "declined"
    ) -> dict[str, Any]:
        """Turn down a task you were asked to do."""
        return await lifecycle(task_id, "reject", {"code": code, "message": message})

    @server.tool()
    async def task_progress(
        task_id: str,
        message: str | None = None,
        percent: int | None = None,
        stage: str | None = None,
    ) -> dict[str, Any]:
        """Tell the requester where the work stands."""
        data = {"message": message, "percent": percent, "stage": stage}
        return await lifecycle(task_id, "progress", data)

    @server.tool()
    async def task_complete(
        task_id: str, summary: str, output: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        """Finish a task with its result."""
        return await lifecycle(task_id, "complete", {"summary": summary, "output": output})

    @server.tool()
    async def task_fail(
        task_id: str, message: str, code: str = "failed", retryable: bool = False
    ) -> dict[str, Any]:
        """Give up on a task, saying why."""
        data = {"message": message, "code": code, "retryable": retryable}
        return await lifecycle(task_id, "fail", data)

    @server.tool()
    async def task_cancel(task_id: str, reason: str | None = None) -> dict[str, Any]:
        """Call off a task this agent asked for."""
        return await lifecycle(task_id, "cancel", {"reason": reason})

    @server.tool()
    async def task_show(task_id: str) -> dict[str, Any]:
        """The gateway's view of a task: state, progress, result message."""
        return await guarded(rt.session.call(rt.client.get_task, task_id))

    @server.tool()
    async def task_list(role: str | None = None, state: str | None = None) -> dict[str, Any]:
        """Tasks this agent asked for (role requester) or was asked to do (recipient)."""
        return await guarded(rt.session.call(rt.client.list_tasks, role or "", state or ""))

    @server.tool()
    async def task_wait(task_id: str, timeout_s: int = 300) -> dict[str, Any]:
        """Wait until a task this agent asked for ends (or the time runs out)."""
        changes: list[dict[str, Any]] = []
        result = await guarded(
            wait_for_task(rt, task_id, min(timeout_s, WAIT_MAX_S), changes.append)
        )
        return {
            "outcome": result.outcome,
            "task": result.task,
            "changes": len(changes),
            "waited_s": round(result.waited_s, 3),
            "detail": result.detail,
        }

    @server.tool()
    async def agents(
        capability: str | None = None,
        query: str | None = None,
        status: str | None = None,
        limit: int = 50,
    ) -> dict[str, Any]:
        """The agents this one may address, by capability, text in name or description, or
        status (online, idle, offline)."""
        params = _clean({"capability": capability, "q": query, "status": status})
        found = await guarded(rt.session.items(rt.client.list_agents, params, min(limit, 1000)))
        return {"agents": found}

    @server.tool()
    async def trace(msg_id: str) -> dict[str, Any]:
        """Where a message (msg_) or receipt (rcp_) is: this side's half and the gateway's."""
        return await guarded(trace_message(rt, msg_id))

    @server.resource(
        "agentbus://inbox", name="inbox", mime_type="application/json",
        description="Unread messages, oldest first.",
    )  # fmt: skip
    async def inbox_resource() -> dict[str, Any]:
        return {"messages": unread()}

    @server.resource(
        "agentbus://inbox/{msg_id}", name="message", mime_type="application/json",
        description="One received message's envelope (reading it does not mark it read).",
    )  # fmt: skip
    async def message_resource(msg_id: str) -> dict[str, Any]:
        row = inbox.get(rt.conn, msg_id)
        if row is None or not row["transport_acked"]:
            raise ResourceNotFoundError(f"no message {msg_id} in this agent's inbox")
        return inbox.envelope_of(row)

    return server
