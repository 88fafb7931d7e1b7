"""Usage capture: each model turn a harness reports becomes a record of ``usage_local`` (data
model §7), uploaded later by the sidecar loop (``POST /v1/usage``).

Records follow the gateway's token convention (04-API-SPEC §9): ``input_tokens`` without the
cached tokens, ``reasoning_tokens`` a part of ``output_tokens``. A record's id is a UUID derived
from the harness, its session and the harness's own name for the turn, so a transcript read
twice, or a hook run twice, adds nothing. Where a harness writes a file (Claude Code's
transcript, Gemini CLI's chat recording, Codex's rollout), the byte offset read so far is kept
in ``adapter_state`` as ``offset:<path>``, and only whole lines are read.

A record names the task the agent is working on, if any: the last task this agent accepted or
reported progress on and has not finished (``adapter_state`` ``tasks``/``current``, kept by the
task verbs), so a task's budget is held to the turns spent on it.
"""

from __future__ import annotations

import json
import re
import sqlite3
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from agentbus_sidecar.clock import format_ts, parse_ts, utcnow
from agentbus_sidecar.store.meta import get_adapter_state, set_adapter_state
from agentbus_sidecar.store.usage import add_usage

__all__ = [
    "CURRENT_TASK",
    "capture_claude_transcript",
    "capture_codex_rollout",
    "capture_gemini_transcript",
    "capture_opencode_message",
    "claude_turns",
    "codex_turns",
    "current_task",
    "gemini_turns",
    "set_current_task",
    "usage_id",
]

CURRENT_TASK = ("tasks", "current")
READ_MAX = 16 * 1024 * 1024  # bytes of transcript read per call; the rest on the next one
_NAMESPACE = uuid.UUID("6f1d1c0e-4b5a-4d8e-9b1f-0a2b3c4d5e6f")


def usage_id(harness: str, session: str, turn: str) -> str:
    return "usg_" + uuid.uuid5(_NAMESPACE, f"{harness}\x1f{session}\x1f{turn}").hex


def current_task(conn: sqlite3.Connection) -> str | None:
    return get_adapter_state(conn, *CURRENT_TASK) or None


def set_current_task(conn: sqlite3.Connection, task_id: str | None) -> None:
    set_adapter_state(conn, *CURRENT_TASK, task_id or "", utcnow())


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def _when(value: Any, default: datetime) -> str:
    try:
        return format_ts(parse_ts(value)) if isinstance(value, str) else format_ts(default)
    except ValueError:
        return format_ts(default)


def _lines(path: Path, offset: int) -> tuple[list[bytes], int]:
    """Whole lines from ``offset`` (at most ``READ_MAX`` bytes), and the offset after them."""
    with path.open("rb") as handle:
        handle.seek(offset)
        chunk = handle.read(READ_MAX)
    end = chunk.rfind(b"\n") + 1
    return chunk[:end].splitlines(), offset + end


def claude_turns(lines: list[bytes], session: str, task: str | None) -> Iterator[dict[str, Any]]:
    """One record per assistant message of a Claude Code transcript (its lines repeat the
    message's usage once per content block: the last one counts)."""
    turns: dict[str, dict[str, Any]] = {}
    for raw in lines:
        try:
            line = json.loads(raw)
        except ValueError:
            continue
        message = line.get("message") if isinstance(line, dict) else None
        if line.get("type") != "assistant" or not isinstance(message, dict):
            continue
        usage, model, ident = message.get("usage"), message.get("model"), message.get("id")
        if not isinstance(usage, dict) or not isinstance(model, str) or not isinstance(ident, str):
            continue
        if model.startswith("<"):  # "<synthetic>": Claude Code's own messages, no model call
            continue
        turns[ident] = {
            "id": usage_id("claude", session, ident),
            "recorded_at": _when(line.get("timestamp"), utcnow()),
            "task_id": task,
            "harness": "claude",
            "provider": "anthropic",
            "model": model[:100],
            "input_tokens": _count(usage.get("input_tokens")),
            "output_tokens": _count(usage.get("output_tokens")),
            "cache_read_tokens": _count(usage.get("cache_read_input_tokens")),
            "cache_write_tokens": _count(usage.get("cache_creation_input_tokens")),
            "reported_by": "harness",
            "confidence": "exact",
            "details": {"session_id": session[:100], "message_id": ident[:100]},
        }
    yield from turns.values()


def gemini_turns(lines: list[bytes], session: str, task: str | None) -> Iterator[dict[str, Any]]:
    """One record per model answer of a Gemini CLI chat recording (JSONL, a message appended
    again when it changes: the last one with ``tokens`` counts). Gemini's prompt count holds
    the cached tokens and its candidates count leaves out the thoughts: converted here."""
    turns: dict[str, dict[str, Any]] = {}
    for raw in lines:
        try:
            line = json.loads(raw)
        except ValueError:
            continue
        if not isinstance(line, dict) or line.get("type") != "gemini":
            continue
        tokens, model, ident = line.get("tokens"), line.get("model"), line.get("id")
        if not isinstance(tokens, dict) or not isinstance(model, str) or not isinstance(ident, str):
            continue
        cached, thoughts = _count(tokens.get("cached")), _count(tokens.get("thoughts"))
        turns[ident] = {
            "id": usage_id("gemini", session, ident),
            "recorded_at": _when(line.get("timestamp"), utcnow()),
            "task_id": task,
            "harness": "gemini",
            "provider": "google",
            "model": model[:100],
            "input_tokens": max(0, _count(tokens.get("input")) - cached),
            "output_tokens": _count(tokens.get("output")) + thoughts,
            "cache_read_tokens": cached,
            "reasoning_tokens": thoughts,
            "reported_by": "harness",
            "confidence": "exact",
            "details": {"session_id": session[:100], "message_id": ident[:100]},
        }
    yield from turns.values()


Reader = Callable[[list[bytes], str, str | None], Iterator[dict[str, Any]]]


def _capture(conn: sqlite3.Connection, adapter: str, payload: dict[str, Any], read: Reader) -> int:
    path, session = payload.get("transcript_path"), payload.get("session_id")
    if not isinstance(path, str) or not isinstance(session, str) or not Path(path).is_file():
        return 0
    key = f"offset:{path}"
    offset = int(get_adapter_state(conn, adapter, key) or 0)
    if offset > Path(path).stat().st_size:  # rewritten from the start
        offset = 0
    lines, offset = _lines(Path(path), offset)
    added = add_usage(conn, read(lines, session, current_task(conn)))
    set_adapter_state(conn, adapter, key, str(offset), utcnow())
    return added


def capture_claude_transcript(conn: sqlite3.Connection, payload: dict[str, Any]) -> int:
    """The turns a Claude Code hook's ``transcript_path`` gained since the last call, stored;
    how many records were new."""
    return _capture(conn, "claude-code", payload, claude_turns)


def codex_turns(
    lines: list[bytes], thread: str, task: str | None, model: str | None
) -> tuple[list[dict[str, Any]], str | None]:
    """One record per ``token_count`` event of a Codex rollout (its ``last_token_usage``; the
    cumulative ``total_token_usage`` names it), the model from the latest ``turn_context``;
    and the model in force at the end, for the next read. OpenAI's input count holds the cached
    tokens and its output count the reasoning: converted here."""
    records = []
    for raw in lines:
        try:
            line = json.loads(raw)
        except ValueError:
            continue
        payload = line.get("payload") if isinstance(line, dict) else None
        if not isinstance(payload, dict):
            continue
        if line.get("type") == "turn_context" and isinstance(payload.get("model"), str):
            model = payload["model"]
            continue
        info = payload.get("info") if payload.get("type") == "token_count" else None
        last = info.get("last_token_usage") if isinstance(info, dict) else None
        total = info.get("total_token_usage") if isinstance(info, dict) else None
        if not isinstance(last, dict) or not isinstance(total, dict) or model is None:
            continue
        cached = _count(last.get("cached_input_tokens"))
        records.append({
            "id": usage_id("codex", thread, str(_count(total.get("total_tokens")))),
            "recorded_at": _when(line.get("timestamp"), utcnow()),
            "task_id": task,
            "harness": "codex",
            "provider": "openai",
            "model": model[:100],
            "input_tokens": max(0, _count(last.get("input_tokens")) - cached),
            "output_tokens": _count(last.get("output_tokens")),
            "cache_read_tokens": cached,
            "reasoning_tokens": _count(last.get("reasoning_output_tokens")),
            "reported_by": "harness",
            "confidence": "exact",
            "details": {"thread_id": thread[:100]},
        })  # fmt: skip
    return records, model


_THREAD = re.compile(r"^[0-9a-fA-F-]{8,64}$")


def capture_codex_rollout(
    conn: sqlite3.Connection, payload: dict[str, Any], codex_home: Path
) -> int:
    """The turns a Codex thread's rollout file gained since the last call (Codex's ``notify``
    names the thread), stored; how many records were new."""
    thread = payload.get("thread-id")
    if not isinstance(thread, str) or not _THREAD.match(thread):
        return 0
    found = sorted((codex_home / "sessions").glob(f"**/rollout-*{thread}.jsonl"))
    if not found:
        return 0
    path = found[-1]
    key, model_key = f"offset:{path}", f"model:{thread}"
    offset = int(get_adapter_state(conn, "codex", key) or 0)
    if offset > path.stat().st_size:
        offset = 0
    lines, offset = _lines(path, offset)
    model = get_adapter_state(conn, "codex", model_key)
    records, model = codex_turns(lines, thread, current_task(conn), model)
    added = add_usage(conn, records)
    if model is not None:
        set_adapter_state(conn, "codex", model_key, model, utcnow())
    set_adapter_state(conn, "codex", key, str(offset), utcnow())
    return added


_PROVIDERS = {"anthropic": "anthropic", "openai": "openai", "google": "google"}


def capture_opencode_message(conn: sqlite3.Connection, info: dict[str, Any]) -> int:
    """A finished OpenCode assistant message (its ``message.updated`` event's ``info``), with
    the tokens and the cost OpenCode reports, stored; 1 if it was new."""
    tokens, ident = info.get("tokens"), info.get("id")
    model, session = info.get("modelID"), info.get("sessionID")
    if not all(isinstance(v, str) for v in (ident, model, session)) or not isinstance(tokens, dict):
        return 0
    held = tokens.get("cache")
    cache: dict[str, Any] = held if isinstance(held, dict) else {}
    completed = (
        (info.get("time") or {}).get("completed") if isinstance(info.get("time"), dict) else None
    )
    at = (
        datetime.fromtimestamp(completed / 1000, UTC)
        if isinstance(completed, int | float)
        else utcnow()
    )
    record: dict[str, Any] = {
        "id": usage_id("opencode", str(session), str(ident)),
        "recorded_at": format_ts(at),
        "task_id": current_task(conn),
        "harness": "opencode",
        "provider": _PROVIDERS.get(str(info.get("providerID")), "other"),
        "model": str(model)[:100],
        "input_tokens": _count(tokens.get("input")),
        "output_tokens": _count(tokens.get("output")),
        "cache_read_tokens": _count(cache.get("read")),
        "cache_write_tokens": _count(cache.get("write")),
        "reasoning_tokens": _count(tokens.get("reasoning")),
        "reported_by": "harness",
        "confidence": "exact",
        "details": {"session_id": str(session)[:100], "message_id": str(ident)[:100]},
    }
    cost = info.get("cost")
    if isinstance(cost, int | float) and not isinstance(cost, bool) and 0 <= cost < 1e8:
        record["cost_usd"] = f"{cost:.6f}"
        record["cost_source"] = "harness_reported"
    return add_usage(conn, [record])


def capture_gemini_transcript(conn: sqlite3.Connection, payload: dict[str, Any]) -> int:
    """The same for a Gemini CLI hook's ``transcript_path`` (its chat recording)."""
    return _capture(conn, "gemini", payload, gemini_turns)
