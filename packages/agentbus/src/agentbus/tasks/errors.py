"""The 6xxx codes of 00-CONVENTIONS.md §6 that travel over HTTP (AB-6010 and AB-6011 are event
codes, written to ``tasks.error_code`` only)."""

from __future__ import annotations

from agentbus.errors import AgentBusError


class TaskNotFound(AgentBusError):
    code, status, name, title = "AB-6001", 404, "task_not_found", "Task not found"


class IdempotencyConflict(AgentBusError):
    code, status, name = "AB-6002", 409, "idempotency_conflict"
    title = "Idempotency key already used for another request"


class TaskTerminal(AgentBusError):
    code, status, name, title = "AB-6003", 409, "task_terminal", "Task is already finished"


class TransitionInvalid(AgentBusError):
    code, status, name, title = "AB-6004", 409, "transition_invalid", "Not allowed in this state"


class NotTaskParty(AgentBusError):
    code, status, name = "AB-6005", 403, "not_task_party"
    title = "Sender is not the party this message requires"


class CapabilityNotOffered(AgentBusError):
    code, status, name = "AB-6006", 422, "capability_not_offered"
    title = "Recipient does not offer the capability"


class CapabilityVersionUnsupported(AgentBusError):
    code, status, name = "AB-6007", 422, "capability_version_unsupported"
    title = "Capability not offered at that version"


class DeadlineInvalid(AgentBusError):
    code, status, name, title = "AB-6008", 422, "deadline_invalid", "Deadline is invalid"


class BudgetInvalid(AgentBusError):
    code, status, name, title = "AB-6009", 422, "budget_invalid", "Budget is invalid"


REFUSALS: dict[str, type[AgentBusError]] = {
    "AB-6003": TaskTerminal,
    "AB-6004": TransitionInvalid,
    "AB-6005": NotTaskParty,
}
