"""The errors z4j's actions raise, each with a stable code, an HTTP status and a title.

The tree (codes in brackets)::

    Z4jError
    +-- AuthRequired              [auth.required]             401 no valid session
    +-- InvalidCredentials        [auth.invalid_credentials]  401 wrong email or password
    +-- SignInThrottled           [auth.throttled]            429 too many failed sign-ins
    +-- CsrfRejected              [auth.csrf]                 403 missing/foreign origin or token
    +-- PermissionDenied          [permission.denied]         403 visible, but not for this role
    |   +-- InvitationForAnother  [invitation.other_user]     signed in as someone else
    +-- MailFailed                [mail.failed]               502 the mail server refused
    +-- NotFound                                              404 (one subclass per noun)
    |   +-- ProjectNotFound       [project.not_found]
    |   +-- AgentNotFound         [agent.not_found]
    |   +-- TaskNotFound          [task.not_found]
    |   +-- UserNotFound          [user.not_found]
    |   +-- MemberNotFound        [member.not_found]
    |   +-- InvitationNotFound    [invitation.not_found]      unknown, used, expired or revoked
    |   +-- SetupUnavailable      [setup.unavailable]         no setup token, or setup is done
    +-- Conflict                                              409
    |   +-- AgentNameTaken        [agent.name_taken]
    |   +-- ProjectNameTaken      [project.name_taken]
    |   +-- UserEmailTaken        [user.email_taken]
    |   +-- AlreadyMember         [member.exists]
    |   +-- LastOwner             [member.last_owner]         a project keeps one owner
    +-- InvalidInput              [validation_failed]         422 (field names the culprit)
        +-- WeakPassword          [password.weak]             field: password
        +-- InvalidCursor         [task.cursor_invalid]
        +-- SearchTooBroad        [task.search_too_broad]

Actions raise these and never HTTP exceptions; the API renders every one as problem+json and
the console as an error page. The base is the kernel's ``ProblemError``: ``detail`` is the
sentence for this occurrence, keyword arguments become extra problem members.
"""

from __future__ import annotations

from platformkit.http import ProblemError


class Z4jError(ProblemError):
    code, status, title = "internal", 500, "Internal error"


class AuthRequired(Z4jError):
    code, status, title = "auth.required", 401, "Authentication required"


class InvalidCredentials(Z4jError):
    code, status, title = "auth.invalid_credentials", 401, "Invalid email or password"


class SignInThrottled(Z4jError):
    """Raised with a Retry-After header: the seconds until this account and address may try."""

    code, status, title = "auth.throttled", 429, "Too many failed sign-ins; try again later"


class CsrfRejected(Z4jError):
    code, status, title = "auth.csrf", 403, "Cross-site request refused"


class PermissionDenied(Z4jError):
    code, status, title = "permission.denied", 403, "Your role does not allow this"


class InvitationForAnother(PermissionDenied):
    code, title = "invitation.other_user", "This invitation is for another email address"


class MailFailed(Z4jError):
    code, status, title = "mail.failed", 502, "The mail could not be sent"


class NotFound(Z4jError):
    code, status, title = "not_found", 404, "Not found"


class ProjectNotFound(NotFound):
    code, title = "project.not_found", "Project not found"


class AgentNotFound(NotFound):
    code, title = "agent.not_found", "Agent not found"


class TaskNotFound(NotFound):
    code, title = "task.not_found", "Task not found"


class UserNotFound(NotFound):
    code, title = "user.not_found", "User not found"


class MemberNotFound(NotFound):
    code, title = "member.not_found", "Not a member of this project"


class InvitationNotFound(NotFound):
    code, title = "invitation.not_found", "This invitation is not valid any more"


class SetupUnavailable(NotFound):
    code, title = "setup.unavailable", "Setup is not available"


class Conflict(Z4jError):
    code, status, title = "conflict", 409, "Conflict"


class AgentNameTaken(Conflict):
    code, title = "agent.name_taken", "An agent with this name exists in the project"


class ProjectNameTaken(Conflict):
    code, title = "project.name_taken", "A project with this name exists"


class UserEmailTaken(Conflict):
    code, title = "user.email_taken", "A user with this email exists"


class AlreadyMember(Conflict):
    code, title = "member.exists", "This user is already a member of the project"


class LastOwner(Conflict):
    code, title = "member.last_owner", "A project keeps at least one owner"


class InvalidInput(Z4jError):
    code, status, title = "validation_failed", 422, "Invalid input"


class WeakPassword(InvalidInput):
    code, title = "password.weak", "Password not allowed"


class InvalidCursor(InvalidInput):
    code, title = "task.cursor_invalid", "The cursor is not one this brain issued"


class SearchTooBroad(InvalidInput):
    code, title = "task.search_too_broad", "The search took too long; narrow the time range"
