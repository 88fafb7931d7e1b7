"""Helpers for tests that need a real service: free ports, and skip-or-fail when one is missing."""

from __future__ import annotations

import os
import socket
from typing import NoReturn

import pytest


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def service_missing(name: str, reason: str) -> NoReturn:
    """In CI a missing service is a failure; on a developer's machine the test is skipped."""
    message = f"{name} is not available: {reason}"
    if os.environ.get("CI", "").lower() in {"1", "true", "yes"}:
        pytest.fail(message, pytrace=False)
    pytest.skip(message)


def tcp_reachable(host: str, port: int, timeout: float = 1.0) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False
