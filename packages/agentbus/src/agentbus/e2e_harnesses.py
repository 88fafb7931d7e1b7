"""What the end-to-end tests of the harness adapters share: the coding-agent CLIs and the MCP
inspector installed from npm into ``tools/harnesses`` (``npm ci`` there; ``.ci/run`` does it),
found by name, and skipped with the reason when absent, except under ``CI=true``, where a
missing CLI fails the test."""

from __future__ import annotations

import json
import os
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import psycopg
import pytest

__all__ = [
    "HARNESS_DIR",
    "StandInAnthropic",
    "StandInGemini",
    "harness_cli",
    "inspector_cli",
    "report_wake",
]

HARNESS_DIR = Path(__file__).resolve().parents[4] / "tools" / "harnesses"
INSTALL_HINT = "run `npm ci` in tools/harnesses"


def _required(path: Path, what: str) -> Path:
    if path.exists():
        return path
    reason = f"{what} is not installed at {path}; {INSTALL_HINT}"
    if os.environ.get("CI") == "true":
        pytest.fail(reason)
    pytest.skip(reason)


def harness_cli(name: str) -> Path:
    """``claude``, ``codex``, ``gemini`` or ``opencode`` from tools/harnesses."""
    return _required(HARNESS_DIR / "node_modules" / ".bin" / name, f"the {name} CLI")


def inspector_cli() -> Path:
    """The MCP inspector's command-line client (its entry script, run with node)."""
    entry = HARNESS_DIR / "node_modules" / "@modelcontextprotocol" / "inspector-cli" / "build"
    return _required(entry / "index.js", "@modelcontextprotocol/inspector-cli")


def report_wake(database_url: str, msg_id: str, woken_at: float, workload: str) -> float:
    """The time in ms from the gateway's acceptance of message ``msg_id`` to ``woken_at`` (the
    arrival of the woken session's model request at a stand-in), printed as the ``wake_ms``
    figure of ``workload``."""
    with psycopg.connect(database_url) as conn:
        row = conn.execute(
            "SELECT extract(epoch FROM accepted_at) FROM messages WHERE id = %s::uuid",
            (msg_id.removeprefix("msg_"),),
        ).fetchone()
    assert row is not None
    wake_ms = (woken_at - float(row[0])) * 1000
    figure = {"figure": "wake_ms", "value": round(wake_ms), "unit": "ms"}
    print(json.dumps({**figure, "workload": workload}))
    return wake_ms


class StandInAnthropic:
    """A stand-in for the Anthropic Messages API on loopback (``ANTHROPIC_BASE_URL``), speaking
    its streaming format: while the request offers ``tool`` and holds no tool result yet, the
    answer calls it with ``arguments``; after that, it ends the turn with a short text. Every
    request's tool names are kept in ``offered``, its arrival time (``time.time()``) in
    ``arrivals`` and the text of its last user message in ``prompts``. Each answer reports
    usage (12 input tokens, 2,000 read from and 300 written to the cache, 5 output tokens)
    under its own message id."""

    def __init__(self, tool: str, arguments: dict[str, Any]) -> None:
        self.tool, self.arguments = tool, arguments
        self.offered: list[list[str]] = []
        self.arrivals: list[float] = []
        self.prompts: list[str] = []
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self) -> StandInAnthropic:
        self.thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()

    def _events(self, body: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
        tools = [str(t.get("name")) for t in body.get("tools") or []]
        self.offered.append(tools)
        last = (body.get("messages") or [{}])[-1]
        content = last.get("content") if isinstance(last.get("content"), list) else []
        texts = [c.get("text", "") for c in content if isinstance(c, dict)]
        self.prompts.append(last["content"] if isinstance(last.get("content"), str)
                            else "\n".join(t for t in texts if isinstance(t, str)))  # fmt: skip
        answered = any(c.get("type") == "tool_result" for c in content)
        use = self.tool in tools and not answered
        usage = {"input_tokens": 12, "output_tokens": 1, "cache_read_input_tokens": 2000,
                 "cache_creation_input_tokens": 300}  # fmt: skip
        ident = f"msg_standin_{len(self.offered)}"  # one per model call, as the API's are
        start: dict[str, Any] = {"id": ident, "type": "message", "role": "assistant",
                                 "model": body.get("model"), "content": [], "stop_reason": None,
                                 "stop_sequence": None, "usage": usage}  # fmt: skip
        block: dict[str, Any]
        if use:
            block = {"type": "tool_use", "id": "toolu_standin", "name": self.tool, "input": {}}
            delta = {"type": "input_json_delta", "partial_json": json.dumps(self.arguments)}
        else:
            block, delta = {"type": "text", "text": ""}, {"type": "text_delta", "text": "done"}
        return [
            ("message_start", {"type": "message_start", "message": start}),
            ("content_block_start", {"type": "content_block_start", "index": 0,
                                     "content_block": block}),
            ("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta}),
            ("content_block_stop", {"type": "content_block_stop", "index": 0}),
            ("message_delta", {"type": "message_delta", "usage": {"output_tokens": 5},
                               "delta": {"stop_reason": "tool_use" if use else "end_turn",
                                         "stop_sequence": None}}),
            ("message_stop", {"type": "message_stop"}),
        ]  # fmt: skip

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        stand_in = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                arrived = time.time()
                length = int(self.headers.get("content-length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                if "count_tokens" in self.path:
                    out = json.dumps({"input_tokens": 10}).encode()
                    self.send_response(200)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(out)))
                    self.end_headers()
                    self.wfile.write(out)
                    return
                stand_in.arrivals.append(arrived)
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.end_headers()
                for event, data in stand_in._events(body):
                    self.wfile.write(f"event: {event}\ndata: {json.dumps(data)}\n\n".encode())
                self.wfile.flush()

            def log_message(self, format: str, *args: Any) -> None:
                return

        return Handler


class StandInGemini:
    """A stand-in for the Gemini API on loopback (``GOOGLE_GEMINI_BASE_URL``): every
    ``streamGenerateContent`` is answered with one SSE chunk, the text ``done`` and usage (100
    prompt tokens, 5 candidates); each request's arrival time (``time.time()``) is kept in
    ``arrivals`` and the text of its last content in ``prompts``."""

    def __init__(self) -> None:
        self.arrivals: list[float] = []
        self.prompts: list[str] = []
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self) -> StandInGemini:
        self.thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        stand_in = self
        usage = {"promptTokenCount": 100, "candidatesTokenCount": 5, "totalTokenCount": 105}

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                arrived = time.time()
                length = int(self.headers.get("content-length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                model = self.path.split("/models/")[-1].split(":")[0]
                chunk = {"candidates": [{"content": {"role": "model", "parts": [{"text": "done"}]},
                                         "finishReason": "STOP", "index": 0}],
                         "usageMetadata": usage, "modelVersion": model}  # fmt: skip
                if "alt=sse" not in self.path:
                    out = json.dumps(chunk).encode()
                    self.send_response(200)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(out)))
                    self.end_headers()
                    self.wfile.write(out)
                    return
                last = (body.get("contents") or [{}])[-1]
                texts = [p.get("text", "") for p in last.get("parts") or [] if isinstance(p, dict)]
                stand_in.arrivals.append(arrived)
                stand_in.prompts.append("\n".join(t for t in texts if isinstance(t, str)))
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.end_headers()
                self.wfile.write(f"data: {json.dumps(chunk)}\r\n\r\n".encode())
                self.wfile.flush()

            def log_message(self, format: str, *args: Any) -> None:
                return

        return Handler
