"""Task request checks that need no I/O (04-API-SPEC.md §6.1): capability and version offered by
the recipient (AB-6006, AB-6007), deadline in the future and within retention (AB-6008), budget
well formed (AB-6009). The JSON schema of ``agentbus.task.request.v1`` has already run; these are
the checks a schema cannot express.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from agentbus.tasks.errors import (
    BudgetInvalid,
    CapabilityNotOffered,
    CapabilityVersionUnsupported,
    DeadlineInvalid,
)

DECIMAL = re.compile(r"(0|[1-9][0-9]{0,8})(\.[0-9]{1,6})?")
TIMESTAMP = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z")
CURRENCIES = frozenset({"USD"})


def check_capability(offered: Any, capability: str, version: str | None) -> str:
    """The version asked for (default ``"1"``) if the recipient offers it."""
    wanted = version or "1"
    entries = offered if isinstance(offered, list) else []
    versions = {
        str(e.get("version") or "1")
        for e in entries
        if isinstance(e, dict) and e.get("name") == capability
    }
    if not versions:
        raise CapabilityNotOffered(f"the recipient does not offer {capability!r}")
    if wanted not in versions:
        raise CapabilityVersionUnsupported(
            f"{capability!r} is offered at version {', '.join(sorted(versions))}, not {wanted}"
        )
    return wanted


def parse_deadline(value: Any, now: datetime, retention_days: int) -> datetime | None:
    """``data.deadline`` as a datetime (``tasks.expires_at``), or None when absent."""
    if value is None:
        return None
    if not isinstance(value, str) or not TIMESTAMP.fullmatch(value):
        raise DeadlineInvalid("deadline must be a timestamp like 2026-10-12T09:30:00.000Z")
    deadline = datetime.fromisoformat(value.replace("Z", "+00:00"))
    if deadline <= now:
        raise DeadlineInvalid("deadline is not in the future")
    if deadline > now + timedelta(days=retention_days):
        raise DeadlineInvalid(f"deadline is beyond the tenant's {retention_days}-day retention")
    return deadline


def check_budget(value: Any) -> dict[str, str] | None:
    """``data.budget`` as stored in ``tasks.budget`` and ``messages.budget``."""
    if value is None:
        return None
    if not isinstance(value, dict) or set(value) != {"currency", "max"}:
        raise BudgetInvalid("budget must be {currency, max}")
    currency, amount = value["currency"], value["max"]
    if currency not in CURRENCIES:
        raise BudgetInvalid("budget currency must be USD")
    if not isinstance(amount, str) or not DECIMAL.fullmatch(amount) or Decimal(amount) <= 0:
        raise BudgetInvalid("budget max must be a positive decimal string, 6 places at most")
    return {"currency": currency, "max": amount}


def over_budget(budget: Any, spent: Decimal) -> bool:
    """Whether ``spent`` has passed a stored ``tasks.budget`` (reaching it exactly is within)."""
    if not isinstance(budget, dict) or budget.get("currency") not in CURRENCIES:
        return False
    amount = budget.get("max")
    return isinstance(amount, str) and bool(DECIMAL.fullmatch(amount)) and spent > Decimal(amount)


def reported_cost(data: Any) -> Decimal | None:
    """``data.usage.cost_usd`` of a lifecycle message, cumulative for the task, if valid."""
    usage = data.get("usage") if isinstance(data, dict) else None
    cost = usage.get("cost_usd") if isinstance(usage, dict) else None
    if isinstance(cost, str) and DECIMAL.fullmatch(cost):
        return Decimal(cost)
    return None
