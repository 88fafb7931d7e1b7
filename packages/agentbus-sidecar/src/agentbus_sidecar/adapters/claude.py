"""The Claude Code Stop hook (``agentbus hook claude-code stop``). Claude Code runs it when the
model has finished its answer and the session is about to go idle, with a JSON object on
standard input (``session_id``, ``transcript_path``, ``stop_hook_active``, ...). When messages
have arrived that the session was not yet told about, the hook answers ``{"decision":
"block", "reason": ...}``, and Claude Code goes on with that reason as its next instruction;
otherwise it holds the stop up to ``--wait`` seconds, watching state.db (where the agent's MCP
server, running the sidecar loop, stores what is delivered), and hands back the first message
that arrives. With nothing by then it lets the session stop.

The hook first stores the usage of the turns the transcript gained (``adapters.usage``), which
the agent's MCP server uploads. Each message is handed back once: the ids told are kept in
``adapter_state`` (``claude-code``, ``announced``), so a message the model chose not to read
does not keep the session busy.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import time
from collections.abc import Awaitable, Callable
from typing import Any

from agentbus_sidecar.adapters.usage import capture_claude_transcript
from agentbus_sidecar.clock import format_ts, utcnow
from agentbus_sidecar.store.meta import get_adapter_state, set_adapter_state

__all__ = ["ADAPTER", "handback", "stop_hook", "unannounced"]

ADAPTER = "claude-code"
WATCH_S = 0.5
KEEP_ANNOUNCED = 1000


def unannounced(conn: sqlite3.Connection, told: set[str]) -> list[sqlite3.Row]:
    """Received, unread, unexpired messages the session was not told about, oldest first."""
    rows = conn.execute(
        "SELECT * FROM inbox WHERE transport_acked = 1 AND read_at IS NULL "
        "AND (expires_at IS NULL OR expires_at > ?) ORDER BY stream_seq, msg_id",
        (format_ts(utcnow()),),
    ).fetchall()
    return [row for row in rows if row["msg_id"] not in told]


def handback(rows: list[sqlite3.Row]) -> str:
    """The instruction Claude Code continues with."""
    lines = [f"{len(rows)} new AgentBus message(s) arrived while you were idle:"]
    for row in rows:
        envelope = json.loads(bytes(row["envelope"]))
        data = envelope.get("data") or {}
        text = data.get("text") or data.get("instructions") or data.get("summary") or ""
        kind = str(row["type"]).removeprefix("agentbus.").removesuffix(".v1")
        subject = f" task {envelope['subject']}" if envelope.get("subject") else ""
        lines.append(f"- {row['msg_id']} from {row['from_address']} ({kind}{subject}): {text}")
    lines.append(
        "Use the agentbus MCP tools: `read` a message to mark it read, answer with `reply`, "
        "and work on a task with task_accept, task_progress and task_complete."
    )
    return "\n".join(lines)


async def stop_hook(
    conn: sqlite3.Connection,
    payload: dict[str, Any],
    wait_s: float,
    *,
    adapter: str = ADAPTER,
    capture: Callable[[sqlite3.Connection, dict[str, Any]], int] = capture_claude_transcript,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> dict[str, Any] | None:
    """The hook's answer (None: let the session stop). Gemini CLI's AfterAgent hook takes the
    same answer: ``adapter`` names its state, ``capture`` reads its transcript's usage."""
    if isinstance(payload.get("session_id"), str):
        set_adapter_state(conn, adapter, "session_id", payload["session_id"], utcnow())
    capture(conn, payload)
    told: list[str] = json.loads(get_adapter_state(conn, adapter, "announced") or "[]")
    deadline = clock() + wait_s
    while True:
        rows = unannounced(conn, set(told))
        if rows:
            told = [*told, *(row["msg_id"] for row in rows)][-KEEP_ANNOUNCED:]
            set_adapter_state(conn, adapter, "announced", json.dumps(told), utcnow())
            return {"decision": "block", "reason": handback(rows)}
        if clock() >= deadline:
            return None
        await sleep(min(WATCH_S, max(0.0, deadline - clock())))
