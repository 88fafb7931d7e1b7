"""httpx without its command-line tool.

httpx imports its own CLI (click, rich.syntax, pygments) whenever click is installed, which
costs the ``agentbus`` CLI a tenth of a second per start with compiled bytecode, and about half
a second without. The sidecar never uses it, and agents and their hooks run the CLI many times a
session. A ``None`` entry in ``sys.modules`` makes that one import fail, and httpx then keeps its
stub ``httpx.main``. Import httpx from here.
"""

import sys

sys.modules.setdefault("httpx._main", None)  # type: ignore[arg-type]

import httpx  # noqa: E402

__all__ = ["httpx"]
