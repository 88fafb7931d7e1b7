"""Reading the audit log of elevated actions, ``GET /v1/audit/actions`` (04-API-SPEC §10.5):
the tenant's ``audit_actions`` rows, newest first, a page at a time, for a token with
``read_audit`` or ``admin``. The rows are tenant-wide (they name no workspace), so a token bound
to a workspace is refused (AB-1015) rather than shown other workspaces' actions."""

from __future__ import annotations

from typing import Any

from platformkit.db.scope import tenant_transaction

from agentbus.db import SCOPE
from agentbus.errors import RequestInvalid
from agentbus.gateway.api.auth import AUDIT_SCOPES, require_tenant_wide
from agentbus.gateway.api.views import ts
from agentbus.gateway.context import Gateway
from agentbus.gateway.domain import cursors
from agentbus.store.audit_actions import list_audit_actions
from agentbus.store.integration_tokens import VerifiedToken

LIST_MAX = 200
LIST_CURSOR = "aa"
FILTER_MAX = 200


def action_view(row: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": str(row["id"]),
        "at": ts(row["at"]),
        "actor_type": row["actor_type"],
        "actor_id": row["actor_id"],
        "action": row["action"],
        "target_type": row["target_type"],
        "target_id": row["target_id"],
        "consent_ref": None if row["consent_ref"] is None else str(row["consent_ref"]),
        "details": row["details"],
        "ip": row["ip"],
        "user_agent": row["user_agent"],
    }


def _filter(name: str, value: str | None) -> str | None:
    if value is not None and not 0 < len(value) <= FILTER_MAX:
        raise RequestInvalid(f"{name} takes 1 to {FILTER_MAX} characters", field=name)
    return value


async def list_actions(
    gw: Gateway,
    token: VerifiedToken,
    *,
    action: str | None = None,
    target: str | None = None,
    limit: int = 50,
    cursor: str | None = None,
) -> dict[str, Any]:
    require_tenant_wide(token, AUDIT_SCOPES, "the audit log")
    limit, before = max(1, min(limit, LIST_MAX)), cursors.decode(LIST_CURSOR, cursor)
    async with tenant_transaction(gw.pool, SCOPE, token.tenant_id) as conn:
        rows = await list_audit_actions(
            conn, token.tenant_id, limit=limit, before=before,
            action=_filter("action", action), target_id=_filter("target", target),
        )  # fmt: skip
    return {
        "items": [action_view(row) for row in rows],
        "next_cursor": cursors.after_page(LIST_CURSOR, rows, limit, at="at"),
    }
