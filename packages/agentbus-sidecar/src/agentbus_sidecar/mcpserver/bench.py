"""``agentbus mcp bench``: the latency of tool calls answered from the local store, measured
through the official MCP client against a real ``agentbus mcp serve`` child over stdio (the
way a harness calls it), after a few calls to warm up."""

from __future__ import annotations

import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from mcp import Client
from mcp.client.stdio import StdioServerParameters

__all__ = ["BenchResult", "bench_tool_calls"]

WARMUP = 5


@dataclass
class BenchResult:
    tool: str
    calls: int
    p50_ms: float
    p95_ms: float
    max_ms: float


def agentbus_command() -> str:
    """The ``agentbus`` next to this interpreter (a venv's bin), else the one on PATH."""
    beside = Path(sys.executable).parent / "agentbus"
    return str(beside) if beside.exists() else "agentbus"


async def bench_tool_calls(
    env: dict[str, str], calls: int = 200, tool: str = "inbox"
) -> BenchResult:
    params = StdioServerParameters(command=agentbus_command(), args=["mcp", "serve"], env=env)
    async with Client(params) as client:
        for _ in range(WARMUP):
            await client.call_tool(tool, {})
        took: list[float] = []
        for _ in range(calls):
            start = time.perf_counter()
            result = await client.call_tool(tool, {})
            took.append((time.perf_counter() - start) * 1000)
            if result.is_error:
                raise RuntimeError(f"{tool} failed: {result.content}")
    took.sort()
    return BenchResult(
        tool,
        calls,
        round(statistics.median(took), 2),
        round(took[int(len(took) * 0.95) - 1], 2),
        round(took[-1], 2),
    )
