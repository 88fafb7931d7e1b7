"""What the sign-in tests compare: how many password checks met an unknown account (the
kernel's counter), and a sign-in answer without what differs between any two requests."""

from __future__ import annotations

from typing import Any

import httpx
from prometheus_client import REGISTRY

__all__ = ["comparable", "unknown_account_checks"]


def unknown_account_checks() -> float:
    """The process's count of password checks against an account that does not exist."""
    value = REGISTRY.get_sample_value(
        "platformkit_password_checks_total", {"result": "unknown_account"}
    )
    return value or 0.0


def comparable(response: httpx.Response) -> tuple[int, str, dict[str, Any]]:
    """Status, content type and body of ``response``, the body without its ``request_id``."""
    body = dict(response.json())
    body.pop("request_id", None)
    return response.status_code, response.headers["content-type"], body
