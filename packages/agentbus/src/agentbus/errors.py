"""AgentBus errors: one class per AB code of 00-CONVENTIONS.md §6, rendered once as problem+json.

The tree (the codes defined so far; add a class per code as paths need it)::

    AgentBusError                         AB-9001 500 internal_error
    +-- Unauthenticated                   AB-1001 401 unauthenticated
    +-- TokenInvalid                      AB-1002 401 token_invalid
    +-- TokenRevoked                      AB-1003 401 token_revoked
    +-- TokenExpired                      AB-1004 401 token_expired
    +-- InsufficientScope                 AB-1007 403 insufficient_scope
    +-- RoleRequired                      AB-1008 403 role_required
    +-- TenantSuspended                   AB-1013 403 tenant_suspended
    +-- WorkspaceMismatch                 AB-1015 403 workspace_mismatch
    +-- PolicyInvalid                     AB-4003 422 policy_invalid
    +-- SupportConsentRequired            AB-4005 403 support_consent_required
    +-- PlanLimitReached                  AB-5006 403 plan_limit_reached
    +-- RequestInvalid                    AB-8001 422 request_invalid
    +-- NotFound                          AB-8002 404 not_found
    +-- AlreadyExists                     AB-8003 409 already_exists
    +-- StateConflict                     AB-8008 409 state_conflict
    +-- ConfirmationRequired              AB-8010 428 confirmation_required
    +-- DatabaseUnavailable               AB-9002 503 database_unavailable
    +-- AnalyticsUnavailable              AB-9005 503 analytics_unavailable

``code`` and ``name`` are stable forever. Domain code raises these; only the HTTP layer renders
them (``type`` is ``https://agentbus.exchange/errors/<code>``, ``name`` is a data member).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from platformkit.http import ProblemError


class AgentBusError(ProblemError):
    code = "AB-9001"
    status = 500
    title = "Internal error"
    name: ClassVar[str] = "internal_error"
    type_base = "https://agentbus.exchange/errors/"

    def __init__(
        self, detail: str | None = None, *, headers: Mapping[str, str] | None = None, **data: Any
    ) -> None:
        super().__init__(detail, headers=headers, name=self.name, **data)


class Unauthenticated(AgentBusError):
    code, status, name, title = "AB-1001", 401, "unauthenticated", "Authentication required"


class TokenInvalid(AgentBusError):
    code, status, name, title = "AB-1002", 401, "token_invalid", "Integration token is invalid"


class TokenRevoked(AgentBusError):
    code, status, name, title = "AB-1003", 401, "token_revoked", "Integration token was revoked"


class TokenExpired(AgentBusError):
    code, status, name, title = "AB-1004", 401, "token_expired", "Integration token has expired"


class InsufficientScope(AgentBusError):
    code, status, name, title = "AB-1007", 403, "insufficient_scope", "Scope missing"


class RoleRequired(AgentBusError):
    code, status, name, title = "AB-1008", 403, "role_required", "Role required"


class TenantSuspended(AgentBusError):
    code, status, name, title = "AB-1013", 403, "tenant_suspended", "Tenant is not active"


class WorkspaceMismatch(AgentBusError):
    code, status, name, title = "AB-1015", 403, "workspace_mismatch", "Token bound to a workspace"


class PolicyInvalid(AgentBusError):
    code, status, name, title = "AB-4003", 422, "policy_invalid", "Policy fails validation"


class SupportConsentRequired(AgentBusError):
    code, status, name = "AB-4005", 403, "support_consent_required"
    title = "No open support consent window"


class PlanLimitReached(AgentBusError):
    code, status, name, title = "AB-5006", 403, "plan_limit_reached", "Plan limit reached"


class RequestInvalid(AgentBusError):
    code, status, name, title = "AB-8001", 422, "request_invalid", "Request is invalid"


class NotFound(AgentBusError):
    code, status, name, title = "AB-8002", 404, "not_found", "Not found"


class AlreadyExists(AgentBusError):
    code, status, name, title = "AB-8003", 409, "already_exists", "Already exists"


class StateConflict(AgentBusError):
    code, status, name, title = "AB-8008", 409, "state_conflict", "Not valid in this state"


class ConfirmationRequired(AgentBusError):
    code, status, name = "AB-8010", 428, "confirmation_required"
    title = "Confirmation required"


class DatabaseUnavailable(AgentBusError):
    code, status, name, title = "AB-9002", 503, "database_unavailable", "Database unavailable"


class AnalyticsUnavailable(AgentBusError):
    code, status, name, title = "AB-9005", 503, "analytics_unavailable", "Analytics unavailable"
