"""The Cedar vocabulary of AgentBus policies: the schema every policy is validated against, the
four actions, and the tenant's default policy (docs/agentbus/policies.md).

Principal and resource are agents (``AgentBus::Agent::"agt_..."``, each ``in`` its
``AgentBus::Workspace::"ws_..."``): the principal is the agent that acts (the sender of a
message, task request or accept; the recipient that reads), the resource the other party. The
context describes the message and the moment (UTC).
"""

from __future__ import annotations

from typing import Final

SCHEMA: Final = """
namespace AgentBus {
  entity Workspace { slug: String };
  entity Agent in [Workspace] {
    address: String,
    name: String,
    workspace: String,
    owner: String,
    harness: String,
    capabilities: Set<String>,
  };
  type Message = {
    type: String,
    capability: String,
    size_bytes: Long,
    attachments: Long,
    attachment_bytes: Long,
    priority: String,
    hour: Long,
    weekday: Long,
    now: Long,
  };
  action send, request_task, accept_task, read appliesTo {
    principal: Agent,
    resource: Agent,
    context: Message,
  };
}
"""

SEND, REQUEST_TASK, ACCEPT_TASK, READ = "send", "request_task", "accept_task", "read"
ACTIONS: Final = (SEND, REQUEST_TASK, ACCEPT_TASK, READ)

MESSAGE_TYPE = "agentbus.message.v1"
REQUEST_TYPE = "agentbus.task.request.v1"
ACCEPT_TYPE = "agentbus.task.accept.v1"

DEFAULT_NAME: Final = "default"
DEFAULT_CEDAR: Final = (
    "// Every agent may address every other agent of the tenant, as without policies.\n"
    "// Disable it and write narrower permits, or add forbids beside it.\n"
    "permit(principal, action, resource);\n"
)


def action_of(message_type: str, *, reading: bool = False) -> str | None:
    """The Cedar action a message of ``message_type`` asks for; None for the task lifecycle
    messages after the accept (progress, complete, fail, cancel, reject), which continue a
    task the policies already let start."""
    if reading:
        return READ
    return {MESSAGE_TYPE: SEND, REQUEST_TYPE: REQUEST_TASK, ACCEPT_TYPE: ACCEPT_TASK}.get(
        message_type
    )
