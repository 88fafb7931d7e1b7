"""The errors strataplane's actions raise: a stable code, an HTTP status and a title each.

The tree (codes in brackets)::

    StrataplaneError
    +-- AuthRequired             [auth.required]               401 no valid credential
    +-- InvalidCredentials       [auth.invalid_credentials]    401 wrong username or password
    +-- SignInThrottled          [auth.throttled]              429 too many failed sign-ins
    +-- OidcFailed               [auth.oidc_failed]            401 the OIDC sign-in did not complete
    +-- CsrfRejected             [auth.csrf]                   403 session request without token
    +-- PermissionDenied         [permission.denied]           403 data: permission
    +-- PlatformAdminRequired    [platform.admin_required]     403 a platform credential of an admin
    +-- TenantSuspended          [tenant.suspended]            403 no logins, no API tokens
    +-- MembershipDisabled       [member.disabled]             403 disabled here, or no membership
    +-- NotFound                                               404 one subclass per noun
    |   +-- OidcNotConfigured    [oidc.not_configured]         404 no OIDC provider is set up
    +-- Conflict                                               409 one subclass per rule
    +-- InvalidInput             [validation_failed]           422 one subclass per rule
        +-- WeakPassword         [password.weak]               422 field: password

Actions raise these and never HTTP exceptions; platformkit renders each as problem+json.
"""

from __future__ import annotations

from platformkit.http import ProblemError


class StrataplaneError(ProblemError):
    code, status, title = "internal", 500, "Internal error"


class AuthRequired(StrataplaneError):
    code, status, title = "auth.required", 401, "Authentication required"


class InvalidCredentials(StrataplaneError):
    code, status, title = "auth.invalid_credentials", 401, "Invalid username or password"


class SignInThrottled(StrataplaneError):
    """Raised with a Retry-After header: the seconds until this account and address may try."""

    code, status, title = "auth.throttled", 429, "Too many failed sign-ins; try again later"


class OidcFailed(StrataplaneError):
    """The provider's answer was refused (details in the server log, never in the answer)."""

    code, status, title = "auth.oidc_failed", 401, "Single sign-on did not complete"


class CsrfRejected(StrataplaneError):
    code, status, title = "auth.csrf", 403, "Missing or wrong X-CSRF-Token"


class PermissionDenied(StrataplaneError):
    code, status, title = "permission.denied", 403, "Your role bindings do not allow this"


class PlatformAdminRequired(StrataplaneError):
    code, status, title = "platform.admin_required", 403, "A platform admin credential is needed"


class TenantSuspended(StrataplaneError):
    code, status, title = "tenant.suspended", 403, "The tenant is suspended"


class MembershipDisabled(StrataplaneError):
    code, status, title = "member.disabled", 403, "No active membership in this tenant"


class NotFound(StrataplaneError):
    code, status, title = "not_found", 404, "Not found"


class OidcNotConfigured(NotFound):
    code, title = "oidc.not_configured", "No single sign-on provider is configured"


class TenantNotFound(NotFound):
    code, title = "tenant.not_found", "Tenant not found"


class UserNotFound(NotFound):
    code, title = "user.not_found", "User not found"


class MemberNotFound(NotFound):
    code, title = "member.not_found", "Member not found"


class TeamNotFound(NotFound):
    code, title = "team.not_found", "Team not found"


class TeamMemberNotFound(NotFound):
    code, title = "team_member.not_found", "Team member not found"


class ServiceAccountNotFound(NotFound):
    code, title = "service_account.not_found", "Service account not found"


class RoleBindingNotFound(NotFound):
    code, title = "role_binding.not_found", "Role binding not found"


class TokenNotFound(NotFound):
    code, title = "token.not_found", "API token not found"


class InvitationNotFound(NotFound):
    code, title = "invitation.not_found", "Invitation not found"


class OperationNotFound(NotFound):
    code, title = "operation.not_found", "Operation not found"


class Conflict(StrataplaneError):
    code, status, title = "conflict", 409, "Conflict"


class TenantSlugTaken(Conflict):
    code, title = "tenant.slug_taken", "A tenant with this slug exists"


class TenantInvalidState(Conflict):
    code, title = "tenant.invalid_state", "Not allowed in the tenant's state"


class UsernameTaken(Conflict):
    code, title = "user.username_taken", "A local user with this username exists"


class AlreadyMember(Conflict):
    code, title = "member.exists", "The user is already a member of this tenant"


class TeamSlugTaken(Conflict):
    code, title = "team.slug_taken", "A team with this slug exists"


class TeamInUse(Conflict):
    code, title = "team.in_use", "A role binding is scoped to this team"


class AlreadyTeamMember(Conflict):
    code, title = "team_member.exists", "The user is already a member of this team"


class ServiceAccountNameTaken(Conflict):
    code, title = "service_account.name_taken", "A service account with this name exists"


class ServiceAccountInUse(Conflict):
    code, title = "service_account.in_use", "The service account has acted; rows reference it"


class RoleBindingExists(Conflict):
    code, title = "role_binding.exists", "An identical role binding exists"


class LastAdmin(Conflict):
    code, title = "tenant.last_admin", "This would leave the tenant without an admin"


class InvalidInput(StrataplaneError):
    code, status, title = "validation_failed", 422, "Invalid input"


class WeakPassword(InvalidInput):
    code, title = "password.weak", "Password not allowed"


class InvitationRequired(InvalidInput):
    code, title = "member.invitation_required", "An existing user joins by accepting an invitation"


class InvalidSlug(InvalidInput):
    code, title = "slug.invalid", "Invalid slug"


class InvalidScope(InvalidInput):
    code, title = "role_binding.invalid_scope", "Invalid role binding scope"


class NotHuman(InvalidInput):
    code, title = "user.not_human", "Only human users can do this"


class RolesNotHeld(InvalidInput):
    code, title = "token.roles_not_held", "A token may name only roles its owner holds"


class TenantDeleting(StrataplaneError):
    code, status, title = "tenant.deleting", 403, "The tenant is being deleted"


class CatalogUntrusted(InvalidInput):
    code, title = "catalog.untrusted", "No trusted key verifies the bundle's signature"


class CatalogInvalid(InvalidInput):
    code, title = "catalog.invalid", "Not a catalog bundle"


class CatalogExists(Conflict):
    code, title = "catalog.exists", "A bundle of this agent version or hash is imported"


class CatalogNotFound(NotFound):
    code, title = "catalog.not_found", "No such catalog bundle or plugin"


class RolloutNotFound(NotFound):
    code, title = "rollout.not_found", "Rollout not found"


class RolloutInvalidState(Conflict):
    code, title = "rollout.invalid_state", "Not allowed in the rollout's state"


class RolloutActive(Conflict):
    code, title = "rollout.active", "The agent kind already has an active rollout"


class PinNotFound(NotFound):
    code, title = "pin.not_found", "Pin not found"


class PinInvalid(InvalidInput):
    code, title = "pin.invalid", "Invalid pin"
