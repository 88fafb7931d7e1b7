"""Input checks shared by the actions; each failure is AB-8001 naming the field."""

from __future__ import annotations

import re
from datetime import UTC, datetime

from agentbus.errors import RequestInvalid

SLUG = re.compile(r"^[a-z0-9-]{3,40}$")
PLANS = ("starter", "business", "enterprise")
TENANT_ROLES = ("owner", "admin", "member", "auditor", "billing")


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
