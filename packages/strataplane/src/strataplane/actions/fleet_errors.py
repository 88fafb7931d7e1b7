"""The fleet's errors (the StrataplaneError tree of strataplane.errors, extended here)."""

from __future__ import annotations

from strataplane.errors import (
    AuthRequired,
    Conflict,
    InvalidInput,
    NotFound,
    PermissionDenied,
    StrataplaneError,
)


class EnrollmentTokenNotFound(NotFound):
    code, title = "enrollment_token.not_found", "Enrollment token not found"


class HostNotFound(NotFound):
    code, title = "host.not_found", "Host not found"


class AgentNotFound(NotFound):
    code, title = "agent.not_found", "Agent not found"


class ZoneNotFound(NotFound):
    code, title = "network_zone.not_found", "Network zone not found"


class EnrollmentRejected(AuthRequired):
    code, title = "enrollment.rejected", "Unknown, revoked, expired or used-up enrollment token"


class InvalidLabels(InvalidInput):
    code, title = "labels.invalid", "Invalid label"


class UnsupportedMode(InvalidInput):
    code, title = "enrollment_token.unsupported_mode", "This mode is not supported yet"


class ZoneExists(Conflict):
    code, title = "network_zone.exists", "A zone with this CIDR exists"


class AgentNotReplaceable(PermissionDenied):
    code, title = "agent.not_replaceable", "existing agent cannot be replaced"


class UnenrollUnsupported(InvalidInput):
    code, title = "agent.unenroll_unsupported", "This agent kind has no UNENROLL action"


class SettingsUnsupported(InvalidInput):
    code, title = "agent.settings_unsupported", "This agent kind has no SETTINGS action"


class AgentIdentity(PermissionDenied):
    code, title = "agent.identity", "Agent header contains wrong identifier"


class AgentNotApproved(PermissionDenied):
    code, title = "agent.not_approved", "The agent awaits approval"


class UnsupportedVersion(PermissionDenied):
    code, title = "agent.unsupported_version", "This agent version receives no config"


class NoConfigYet(StrataplaneError):
    code, status, title = "agent.no_config", 503, "No configuration is rendered for this agent yet"


class BadReport(InvalidInput):
    code, title = "agent.bad_report", "Not a schema v1 heartbeat"


class MethodNotAllowed(StrataplaneError):
    code, status, title = "method_not_allowed", 405, "Method Not Allowed"


class ContentTooLarge(StrataplaneError):
    code, status, title = "content_too_large", 413, "Content Too Large"
