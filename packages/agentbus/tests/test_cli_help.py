"""The help of ``agentbus-gateway`` and of the sidecar's ``agentbus`` prints every text as
written (rich, which renders it, would swallow ``[default: ...]`` as markup)."""

from __future__ import annotations

from agentbus.cli import app as gateway_cli
from agentbus_sidecar.cli.app import app as sidecar_cli
from platformkit.testing.cli import mangled_help


def test_the_gateway_cli_help_prints_as_written() -> None:
    assert mangled_help(gateway_cli) == []


def test_the_sidecar_cli_help_prints_as_written() -> None:
    assert mangled_help(sidecar_cli) == []
