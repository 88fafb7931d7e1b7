"""The public surface is deliberate, and the sidecar never pulls in the gateway's packages.
(Starlette comes with the MCP SDK, for the MCP server's streamable HTTP, and is allowed.)"""

from __future__ import annotations

import subprocess
import sys

import agentbus_sidecar

PUBLIC = [
    "ConfigError",
    "Credentials",
    "EnvelopeError",
    "GatewayClient",
    "GatewayError",
    "GatewayUnreachable",
    "Runtime",
    "SidecarError",
    "SignatureInvalid",
    "StoreError",
    "build_envelope",
    "load_credentials",
    "new_id",
    "open_runtime",
    "open_store",
    "save_credentials",
    "sign_envelope",
    "verify_envelope",
]


def test_public_api_is_locked() -> None:
    assert agentbus_sidecar.__all__ == PUBLIC
    for name in PUBLIC:
        assert getattr(agentbus_sidecar, name) is not None


IMPORT_EVERYTHING = """
import importlib, pkgutil, sys
import agentbus_sidecar
names = [m.name for m in pkgutil.walk_packages(agentbus_sidecar.__path__, "agentbus_sidecar.")]
for name in names:
    importlib.import_module(name)
assert len(names) > 20, names
bad = sorted(
    m for m in sys.modules
    if m.split(".")[0] in {"platformkit", "agentbus", "fastapi", "psycopg", "nats"}
)
print("\\n".join(bad))
"""


def test_no_server_package_is_ever_imported() -> None:
    # A fresh interpreter: this test session may well have imported the gateway elsewhere.
    result = subprocess.run(
        [sys.executable, "-c", IMPORT_EVERYTHING], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "", result.stdout


STARTUP_IMPORTS = """
import sys
import agentbus_sidecar.cli
print(sorted(m for m in sys.modules if m.split(".")[0] in {"mcp", "starlette", "uvicorn"}))
"""


def test_the_cli_starts_without_the_mcp_sdk() -> None:
    """Every command but ``agentbus mcp`` runs without importing the MCP SDK (start time)."""
    result = subprocess.run(
        [sys.executable, "-c", STARTUP_IMPORTS], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "[]", result.stdout
