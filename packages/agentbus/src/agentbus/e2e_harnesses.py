"""What the end-to-end tests of the harness adapters share: the coding-agent CLIs and the MCP
inspector installed from npm into ``tools/harnesses`` (``npm ci`` there; ``.ci/run`` does it),
found by name, and skipped with the reason when absent, except under ``CI=true``, where a
missing CLI fails the test."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

__all__ = ["HARNESS_DIR", "harness_cli", "inspector_cli"]

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
