"""Usage capture from what harnesses write (adapters.usage) into ``usage_local``: a Claude Code
transcript read from the offset kept in ``adapter_state``, one record per assistant message,
ids stable across reads, the current task named; and the records pending upload."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

from agentbus_sidecar.adapters.usage import (
    capture_claude_transcript,
    capture_codex_rollout,
    capture_gemini_transcript,
    capture_opencode_message,
    set_current_task,
    usage_id,
)
from agentbus_sidecar.store.meta import get_adapter_state
from agentbus_sidecar.store.usage import mark_uploaded, pending_usage

TASK = "tsk_" + "0" * 12 + "7" + "0" * 19


def assistant(ident: str, output: int, model: str = "claude-sonnet-4-5-20250929") -> dict[str, Any]:
    usage = {"input_tokens": 10, "output_tokens": output, "cache_read_input_tokens": 2000,
             "cache_creation_input_tokens": 300}  # fmt: skip
    message = {"id": ident, "model": model, "role": "assistant", "usage": usage}
    return {"type": "assistant", "timestamp": "2026-11-02T10:00:00.123Z", "message": message}


def write(path: Path, *lines: dict[str, Any] | str) -> None:
    with path.open("a") as handle:
        for line in lines:
            handle.write((line if isinstance(line, str) else json.dumps(line)) + "\n")


def test_a_transcript_is_read_once_from_its_offset(db: sqlite3.Connection, tmp_path: Path) -> None:
    transcript = tmp_path / "s1.jsonl"
    write(transcript, {"type": "user", "message": {"role": "user", "content": "hi"}},
          assistant("msg_a", 5), assistant("msg_a", 7),  # two content blocks of one message
          assistant("msg_b", 9), assistant("msg_s", 0, "<synthetic>"), "not json")  # fmt: skip
    payload = {"session_id": "s1", "transcript_path": str(transcript)}
    assert capture_claude_transcript(db, payload) == 2
    records = {r["details"]["message_id"]: r for r in pending_usage(db, 10)}
    assert set(records) == {"msg_a", "msg_b"}
    first = records["msg_a"]
    assert first["id"] == usage_id("claude", "s1", "msg_a")
    assert (first["input_tokens"], first["output_tokens"]) == (10, 7)
    assert (first["cache_read_tokens"], first["cache_write_tokens"]) == (2000, 300)
    assert (first["provider"], first["harness"], first["reported_by"]) == (
        "anthropic", "claude", "harness",
    )  # fmt: skip
    assert first["recorded_at"] == "2026-11-02T10:00:00.123Z"
    assert first["task_id"] is None
    offset = int(get_adapter_state(db, "claude-code", f"offset:{transcript}") or 0)
    assert offset == transcript.stat().st_size

    # Nothing new: nothing added; a half-written line waits for its end; the current task counts.
    assert capture_claude_transcript(db, payload) == 0
    set_current_task(db, TASK)
    with transcript.open("a") as handle:
        handle.write(json.dumps(assistant("msg_c", 3))[:40])
    assert capture_claude_transcript(db, payload) == 0
    with transcript.open("a") as handle:
        handle.write(json.dumps(assistant("msg_c", 3))[40:] + "\n")
    assert capture_claude_transcript(db, payload) == 1
    [third] = [r for r in pending_usage(db, 10) if r["details"]["message_id"] == "msg_c"]
    assert third["task_id"] == TASK

    mark_uploaded(db, [r["id"] for r in pending_usage(db, 10)])
    assert pending_usage(db, 10) == []


def test_a_missing_or_odd_transcript_adds_nothing_wrong(
    db: sqlite3.Connection, tmp_path: Path
) -> None:
    assert capture_claude_transcript(db, {"session_id": "s1"}) == 0
    folder = {"session_id": "s1", "transcript_path": str(tmp_path)}
    assert capture_claude_transcript(db, folder) == 0
    odd = tmp_path / "odd.jsonl"
    bad_counts = {"input_tokens": -5, "output_tokens": True}
    write(
        odd,
        {"type": "assistant", "message": {"id": 3, "model": None, "usage": []}},
        {"type": "assistant", "message": {"id": "m", "model": "claude-x", "usage": bad_counts}},
    )
    assert capture_claude_transcript(db, {"session_id": "s1", "transcript_path": str(odd)}) == 1
    [record] = pending_usage(db, 10)
    assert (record["input_tokens"], record["output_tokens"]) == (0, 0)


def test_a_gemini_chat_recording_counts_each_answer_once(
    db: sqlite3.Connection, tmp_path: Path
) -> None:
    recording = tmp_path / "session.jsonl"
    tokens = {"input": 1000, "output": 50, "cached": 400, "thoughts": 30, "tool": 0, "total": 1080}
    answer = {"id": "g1", "timestamp": "2026-11-02T10:00:01.000Z", "type": "gemini",
              "content": "ok", "model": "gemini-2.5-pro"}  # fmt: skip
    write(recording, {"sessionId": "s9", "kind": "main"}, {**answer, "tokens": None},
          {**answer, "tokens": tokens}, {**answer, "tokens": tokens, "toolCalls": []},
          {"id": "u1", "type": "user", "content": "hi"})  # fmt: skip
    payload = {"session_id": "s9", "transcript_path": str(recording)}
    assert capture_gemini_transcript(db, payload) == 1
    [record] = pending_usage(db, 10)
    assert record["id"] == usage_id("gemini", "s9", "g1")
    assert (record["provider"], record["model"]) == ("google", "gemini-2.5-pro")
    assert (record["input_tokens"], record["cache_read_tokens"]) == (600, 400)
    assert (record["output_tokens"], record["reasoning_tokens"]) == (80, 30)


def test_a_codex_rollout_counts_each_token_event(db: sqlite3.Connection, tmp_path: Path) -> None:
    thread = "0199a213-81c0-7800-8aa1-bbab2a035a53"
    rollout = (
        tmp_path / "sessions" / "2026" / "11" / "02" / f"rollout-2026-11-02T10-00-00-{thread}.jsonl"
    )
    rollout.parent.mkdir(parents=True)

    def count(total: int, last: dict[str, int]) -> dict[str, Any]:
        info = {"total_token_usage": {"total_tokens": total}, "last_token_usage": last}
        return {"timestamp": "2026-11-02T10:00:02.000Z", "type": "event_msg",
                "payload": {"type": "token_count", "info": info}}  # fmt: skip

    turn = {"input_tokens": 900, "cached_input_tokens": 300, "output_tokens": 120,
            "reasoning_output_tokens": 64, "total_tokens": 1020}  # fmt: skip
    context = {"type": "turn_context", "payload": {"model": "gpt-5-codex"}}
    write(rollout, {"type": "session_meta", "payload": {"id": thread}},
          {"type": "event_msg", "payload": {"type": "token_count", "info": None}},
          context, count(1020, turn))  # fmt: skip
    notify = {"type": "agent-turn-complete", "thread-id": thread}
    assert capture_codex_rollout(db, notify, tmp_path) == 1
    write(rollout, count(1020, turn), count(2040, turn))  # a repeated event, then a new one
    assert capture_codex_rollout(db, notify, tmp_path) == 1
    records = pending_usage(db, 10)
    assert [r["model"] for r in records] == ["gpt-5-codex"] * 2
    first = records[0]
    assert (first["input_tokens"], first["cache_read_tokens"]) == (600, 300)
    assert (first["output_tokens"], first["reasoning_tokens"]) == (120, 64)
    assert capture_codex_rollout(db, {"thread-id": "../../etc"}, tmp_path) == 0


def test_an_opencode_message_keeps_its_cost(db: sqlite3.Connection) -> None:
    info = {"id": "msg_1", "sessionID": "ses_1", "role": "assistant",
            "modelID": "claude-sonnet-4-5", "providerID": "anthropic", "cost": 0.0123,
            "tokens": {"input": 10, "output": 20, "reasoning": 0, "cache": {"read": 5, "write": 1}},
            "time": {"created": 1_790_000_000_000, "completed": 1_790_000_001_500}}  # fmt: skip
    assert capture_opencode_message(db, info) == 1
    assert capture_opencode_message(db, info) == 0
    [record] = pending_usage(db, 10)
    assert (record["cost_usd"], record["cost_source"]) == ("0.012300", "harness_reported")
    assert (record["cache_read_tokens"], record["cache_write_tokens"]) == (5, 1)
    assert record["recorded_at"] == "2026-09-21T14:13:21.500Z"
    assert capture_opencode_message(db, {"id": "x"}) == 0
