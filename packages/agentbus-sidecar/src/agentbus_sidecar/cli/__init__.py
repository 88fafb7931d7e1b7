"""The ``agentbus`` command line: one module per command group, sharing ``cli.app``."""

from wirekit.clierrors import run

from agentbus_sidecar.cli import (
    blobs,
    deadletters,
    directory,
    harness,
    keys,
    mcp_server,
    messages,
    ops,
    setup,
    tasks,
)
from agentbus_sidecar.cli.app import app

__all__ = ["app", "main"]
_COMMANDS = (blobs, deadletters, directory, harness, keys, mcp_server, messages, ops, setup, tasks)


def main() -> None:
    """The ``agentbus`` entry point: one line ``error: <code>: <message>`` on a failure."""
    run(app)
