"""Input checks shared by the actions; each failure is AB-8001 naming the field."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

from platformkit.storable import find_unstorable
from wirekit import canonical_json

from agentbus.errors import RequestInvalid

SLUG = re.compile(r"^[a-z0-9-]{3,40}$")
PLANS = ("starter", "business", "enterprise")
TENANT_ROLES = ("owner", "admin", "member", "auditor", "billing")
SETTINGS_MAX_DEPTH = 16
SETTINGS_MAX_BYTES = 65536


def check_slug(value: str, field: str = "slug") -> str:
    if not isinstance(value, str) or not SLUG.match(value):
        raise RequestInvalid("a slug is 3 to 40 of a-z, 0-9 and '-'", field=field)
    return value


def check_text(
    value: str | None, field: str, *, max_length: int = 200, required: bool = True
) -> str:
    cleaned = " ".join((value or "").split())
    if (required and not cleaned) or len(cleaned) > max_length:
        raise RequestInvalid(f"{field} has 1 to {max_length} characters", field=field)
    return cleaned


def check_one_of(value: str, allowed: tuple[str, ...], field: str) -> str:
    if value not in allowed:
        raise RequestInvalid(f"{field} is one of {', '.join(allowed)}", field=field)
    return value


def check_email(value: str) -> str:
    """Trimmed and lower-cased, so ``UNIQUE (tenant_id, email)`` is case-insensitive."""
    cleaned = (value or "").strip().lower()
    local, _, domain = cleaned.partition("@")
    if not local or "." not in domain or len(cleaned) > 320 or any(c.isspace() for c in cleaned):
        raise RequestInvalid("not an e-mail address", field="email")
    return cleaned


def check_future(
    value: datetime | None, field: str, *, now: datetime | None = None
) -> datetime | None:
    if value is None:
        return None
    if value.tzinfo is None:
        raise RequestInvalid(f"{field} needs a time zone", field=field)
    if value <= (now or datetime.now(UTC)):
        raise RequestInvalid(f"{field} must be in the future", field=field)
    return value


def depth_of(value: Any, limit: int) -> int:
    """How deeply ``value`` nests objects and arrays (a scalar is 0), counted no further than
    ``limit + 1``, without recursion: a value nested past Python's recursion limit is measured
    as easily as a flat one."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        node, level = stack.pop()
        children = (
            node.values() if isinstance(node, dict) else node if isinstance(node, list) else None
        )
        if children is None:
            continue
        deepest = max(deepest, level)
        if deepest > limit:
            return deepest
        stack.extend((child, level + 1) for child in children)
    return deepest


def settings_problem(value: Any) -> str | None:
    """Why ``value`` cannot be a tenant's or workspace's ``settings``, or None: a JSON object at
    most ``SETTINGS_MAX_DEPTH`` deep and ``SETTINGS_MAX_BYTES`` canonical, that PostgreSQL can
    store (no NUL, no lone surrogate, integers within bigint)."""
    if not isinstance(value, dict):
        return "is a JSON object"
    if depth_of(value, SETTINGS_MAX_DEPTH) > SETTINGS_MAX_DEPTH:
        return f"nests at most {SETTINGS_MAX_DEPTH} levels"
    unstorable = find_unstorable(value)
    if unstorable is not None:
        return f"{unstorable.path}: {unstorable.reason}" if unstorable.path else unstorable.reason
    try:
        size = len(canonical_json(value))
    except (TypeError, ValueError):
        return "holds only JSON text, numbers, booleans and null"
    if size > SETTINGS_MAX_BYTES:
        return f"is at most {SETTINGS_MAX_BYTES} bytes"
    return None


def check_settings(value: Any, field: str = "settings") -> dict[str, Any]:
    problem = settings_problem(value)
    if problem is not None:
        raise RequestInvalid(f"{field} {problem}", field=field)
    assert isinstance(value, dict)
    return value
