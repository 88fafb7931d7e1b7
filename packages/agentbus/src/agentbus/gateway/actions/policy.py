"""The policy engine of the send and delivery paths (04-API-SPEC §4.1 step 10, 05 §4 step 3):
each tenant's Cedar policies, pre-parsed once and kept per process.

A tenant's compiled sets (one per workspace: the tenant-wide policies and that workspace's)
are checked against the database at most once per ``POLICY_TTL_S`` by a fingerprint of the
tenant's rows (their number and ``enabled`` flags), and re-read and parsed only when it
changed; a write through this process drops the tenant's sets at once. So a policy change
takes effect within a second on every instance, and parsing never runs per message. A tenant
with no policy rows at all runs the default set (``model.DEFAULT_CEDAR``), as every tenant
created since policies exist has it as a row. The two agents of a decision are kept as Cedar
parsed them, per pair of agent rows (their ``updated_at``), so a lane of messages parses them
once.

Decisions are counted in ``agentbus_policy_decisions_total{action, decision}``. When a set in
force cannot be parsed or evaluated the engine raises ``PolicyError``: sends answer AB-4002 and
deliveries wait (fail closed); a database failure is the request's (AB-9002).
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import cedarpy
from platformkit.db.scope import Conn
from prometheus_client import Counter

from agentbus.policies import domain, store
from agentbus.policies.model import DEFAULT_CEDAR, DEFAULT_NAME

POLICY_TTL_S = 1.0
_MAX_TENANTS = 10000
_MAX_PAIRS = 10000
Row = dict[str, Any]

DECISIONS = Counter(
    "agentbus_policy_decisions",
    "Policy decisions by Cedar action (send, request_task, accept_task, read) and decision "
    "(allow, deny, error)",
    ("action", "decision"),
)


class PolicyError(Exception):
    """The policy set could not be evaluated (AB-4002)."""


@dataclass
class _Tenant:
    checked_at: float
    fingerprint: tuple[int, Any]
    rows: list[Row]
    sets: dict[uuid.UUID | None, domain.Compiled] = field(default_factory=dict)


def default_row(tenant_id: uuid.UUID) -> Row:
    """The default set of a tenant without policy rows."""
    return {"id": None, "tenant_id": tenant_id, "workspace_id": None,
            "name": DEFAULT_NAME, "version": 1, "cedar": DEFAULT_CEDAR,
            "enabled": True}  # fmt: skip


def rows_for(rows: list[Row], workspace_id: uuid.UUID | None) -> list[domain.Row]:
    """The policies in force for an agent of ``workspace_id``: tenant-wide and its own."""
    return [r for r in domain.in_force(rows) if r["workspace_id"] in (None, workspace_id)]


class PolicyEngine:
    def __init__(self, ttl_s: float = POLICY_TTL_S) -> None:
        self.ttl_s = ttl_s
        self._tenants: dict[uuid.UUID, _Tenant] = {}
        self._parsed: dict[tuple[Any, ...], cedarpy.Entities] = {}

    def invalidate(self, tenant_id: uuid.UUID) -> None:
        self._tenants.pop(tenant_id, None)

    async def _tenant(self, conn: Conn, tenant_id: uuid.UUID) -> _Tenant:
        now = time.monotonic()
        cached = self._tenants.get(tenant_id)
        if cached is not None and cached.checked_at + self.ttl_s > now:
            return cached
        # A database failure here is the request's, answered as any other (AB-9002).
        stamp = await store.fingerprint(conn, tenant_id)
        if cached is not None and cached.fingerprint == stamp:
            cached.checked_at = now
            return cached
        rows = await store.tenant_policies(conn, tenant_id) or [default_row(tenant_id)]
        if len(self._tenants) >= _MAX_TENANTS:
            self._tenants.clear()
        fresh = _Tenant(now, stamp, rows)
        self._tenants[tenant_id] = fresh
        return fresh

    async def policy_set(
        self, conn: Conn, tenant_id: uuid.UUID, workspace_id: uuid.UUID | None
    ) -> domain.Compiled:
        """The pre-parsed set for an acting agent of ``workspace_id``."""
        tenant = await self._tenant(conn, tenant_id)
        compiled = tenant.sets.get(workspace_id)
        if compiled is None:
            try:
                compiled = domain.compile_set(rows_for(tenant.rows, workspace_id))
            except ValueError as exc:
                raise PolicyError("a policy in force no longer parses") from exc
            tenant.sets[workspace_id] = compiled
        return compiled

    def _entities(self, request: domain.Request) -> cedarpy.Entities | None:
        """The two agents as Cedar parsed them, kept per pair while neither row changes."""
        principal, resource = request.principal, request.resource
        if "updated_at" not in principal or "updated_at" not in resource:
            return None
        key = (principal["id"], principal["updated_at"], resource["id"], resource["updated_at"])
        parsed = self._parsed.get(key)
        if parsed is None:
            if len(self._parsed) >= _MAX_PAIRS:
                self._parsed.clear()
            parsed = self._parsed[key] = domain.parsed_entities(request)
        return parsed

    def decide(self, compiled: domain.Compiled, request: domain.Request) -> domain.Decision:
        try:
            decision = domain.decide(compiled, request, self._entities(request))
        except Exception as exc:
            DECISIONS.labels(request.action, "error").inc()
            raise PolicyError("the policy set cannot be evaluated") from exc
        count(request.action, decision.allowed)
        return decision


def count(action: str, allowed: bool, n: int = 1) -> None:
    DECISIONS.labels(action, "allow" if allowed else "deny").inc(n)
