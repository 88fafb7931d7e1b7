"""The errors z4j's actions raise, each with a stable code, an HTTP status and a title.

The tree (codes in brackets)::

    Z4jError
    +-- AuthRequired              [auth.required]             401 no valid session
    +-- InvalidCredentials        [auth.invalid_credentials]  401 wrong email or password
    +-- ApiKeyInvalid             [api_key.invalid]           401 unknown, revoked or disabled
    +-- AgentTokenInvalid         [agent.token_invalid]       401 a beat's agent token
    +-- SignInThrottled           [auth.throttled]            429 too many failed sign-ins
    +-- CsrfRejected              [auth.csrf]                 403 missing/foreign origin or token
    +-- PermissionDenied          [permission.denied]         403 visible, but not for this role
    |   +-- InvitationForAnother  [invitation.other_user]     signed in as someone else
    |   +-- SessionRequired       [auth.session_required]     not with an API key
    |   +-- MfaRequired           [mfa.required]              the project wants two-factor
    +-- MailFailed                [mail.failed]               502 the mail server refused
    +-- NotFound                                              404 (one subclass per noun)
    |   +-- ProjectNotFound       [project.not_found]
    |   +-- AgentNotFound         [agent.not_found]
    |   +-- TaskNotFound          [task.not_found]
    |   +-- UserNotFound          [user.not_found]
    |   +-- MemberNotFound        [member.not_found]
    |   +-- InvitationNotFound    [invitation.not_found]      unknown, used, expired or revoked
    |   +-- ResetNotFound         [password_reset.not_found]  unknown, used or expired link
    |   +-- ApiKeyNotFound        [api_key.not_found]
    |   +-- SetupUnavailable      [setup.unavailable]         no setup token, or setup is done
    |   +-- CommandNotFound       [command.not_found]
    |   +-- BulkRetryNotFound     [bulk_retry.not_found]
    |   +-- ScheduleNotFound      [schedule.not_found]
    |   +-- AlertRuleNotFound     [alert_rule.not_found]
    +-- Conflict                                              409
    |   +-- AgentNameTaken        [agent.name_taken]
    |   +-- ProjectNameTaken      [project.name_taken]
    |   +-- UserEmailTaken        [user.email_taken]
    |   +-- AlreadyMember         [member.exists]
    |   +-- LastOwner             [member.last_owner]         a project keeps one owner
    |   +-- LastAdmin             [user.last_admin]           the brain keeps an active admin
    |   +-- MfaState              [mfa.state]                 already on, or not enrolled
    |   +-- CommandNotOffered     [command.not_offered]       no agent advertised the action
    |   +-- ScheduleNameTaken     [schedule.name_taken]
    |   +-- ScheduleDisabled      [schedule.disabled]         run now needs it enabled
    |   +-- AlertRuleNameTaken    [alert_rule.name_taken]
    +-- ConfirmationMismatch      [command.confirmation]      422 typed confirmation differs
    +-- InvalidInput              [validation_failed]         422 (field names the culprit)
        +-- WeakPassword          [password.weak]             field: password
        +-- WrongPassword         [password.wrong]            field: current_password
        +-- MfaCodeInvalid        [mfa.code_invalid]          field: code
        +-- InvalidCursor         [task.cursor_invalid]
        +-- SearchTooBroad        [task.search_too_broad]

Actions raise these and never HTTP exceptions; the API renders every one as problem+json and
the console as an error page. The base is the kernel's ``ProblemError``: ``detail`` is the
sentence for this occurrence, keyword arguments become extra problem members.
"""

from __future__ import annotations

from platformkit.http import ProblemError

from z4j.domain.fields import FieldInvalid


class Z4jError(ProblemError):
    code, status, title = "internal", 500, "Internal error"


class AuthRequired(Z4jError):
    code, status, title = "auth.required", 401, "Authentication required"


class InvalidCredentials(Z4jError):
    code, status, title = "auth.invalid_credentials", 401, "Invalid email or password"


class ApiKeyInvalid(Z4jError):
    code, status, title = "api_key.invalid", 401, "The API key is not valid"


class AgentTokenInvalid(Z4jError):
    code, status, title = "agent.token_invalid", 401, "The agent token is not valid"


class SignInThrottled(Z4jError):
    """Raised with a Retry-After header: the seconds until this account and address may try."""

    code, status, title = "auth.throttled", 429, "Too many failed sign-ins; try again later"


class CsrfRejected(Z4jError):
    code, status, title = "auth.csrf", 403, "Cross-site request refused"


class PermissionDenied(Z4jError):
    code, status, title = "permission.denied", 403, "Your role does not allow this"


class InvitationForAnother(PermissionDenied):
    code, title = "invitation.other_user", "This invitation is for another email address"


class SessionRequired(PermissionDenied):
    code, title = "auth.session_required", "Sign in with a password for this; not an API key"


class MfaRequired(PermissionDenied):
    code, title = "mfa.required", "This project requires two-factor sign-in"


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


class ResetNotFound(NotFound):
    code, title = "password_reset.not_found", "This reset link is not valid any more"


class ApiKeyNotFound(NotFound):
    code, title = "api_key.not_found", "API key not found"


class SetupUnavailable(NotFound):
    code, title = "setup.unavailable", "Setup is not available"


class CommandNotFound(NotFound):
    code, title = "command.not_found", "Command not found"


class BulkRetryNotFound(NotFound):
    code, title = "bulk_retry.not_found", "Bulk retry not found"


class ScheduleNotFound(NotFound):
    code, title = "schedule.not_found", "Schedule not found"


class AlertRuleNotFound(NotFound):
    code, title = "alert_rule.not_found", "Alert rule not found"


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


class LastAdmin(Conflict):
    code, title = "user.last_admin", "The brain keeps at least one active administrator"


class MfaState(Conflict):
    code, title = "mfa.state", "Two-factor sign-in is not in that state"


class CommandNotOffered(Conflict):
    code, title = "command.not_offered", "No agent of this project offers this action"


class ScheduleNameTaken(Conflict):
    code, title = "schedule.name_taken", "A schedule with this name exists in the project"


class ScheduleDisabled(Conflict):
    code, title = "schedule.disabled", "The schedule is disabled; enable it to run it"


class AlertRuleNameTaken(Conflict):
    code, title = "alert_rule.name_taken", "The project has an alert rule of that name"


class InvalidInput(Z4jError):
    code, status, title = "validation_failed", 422, "Invalid input"

    @classmethod
    def of_field(cls, exc: FieldInvalid) -> InvalidInput:
        """A domain rule's refusal of one field, that field named."""
        return cls(f"{exc.field} {exc.reason}.", field=exc.field)


class ConfirmationMismatch(InvalidInput):
    code, title = "command.confirmation", "The typed confirmation does not match"


class WeakPassword(InvalidInput):
    code, title = "password.weak", "Password not allowed"


class WrongPassword(InvalidInput):
    code, title = "password.wrong", "The current password is not right"


class MfaCodeInvalid(InvalidInput):
    code, title = "mfa.code_invalid", "That code is not valid"


class InvalidCursor(InvalidInput):
    code, title = "task.cursor_invalid", "The cursor is not one this brain issued"


class SearchTooBroad(InvalidInput):
    code, title = "task.search_too_broad", "The search took too long; narrow the time range"
