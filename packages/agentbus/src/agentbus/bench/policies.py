"""The policy sets ``agentbus-gateway bench --policies`` runs under: the tenant's ``default``
alone (allow everything, decided without asking Cedar), or ``realistic``: the default beside
forbids of the kinds a company writes (sizes and attachments, office hours for a risky
capability, workspaces kept apart, contractors, offered capabilities, priority), none of which
refuses the benchmark's messages, so every send pays for a full Cedar decision."""

from __future__ import annotations

import uuid

from agentbus import db
from agentbus.actions.context import Actor, Ctx
from agentbus.policies import actions

POLICY_SETS = ("default", "realistic")
REALISTIC = {
    "size-and-attachments": """
forbid(principal, action in [AgentBus::Action::"send", AgentBus::Action::"request_task"], resource)
  when { context.size_bytes > 1048576 || context.attachments > 8
         || context.attachment_bytes > 67108864 };""",
    "deploys-in-office-hours": """
forbid(principal, action == AgentBus::Action::"request_task", resource)
  when { context.capability == "code.deploy"
         && (context.hour < 7 || context.hour >= 19 || context.weekday > 5) };""",
    "sandbox-stays-out-of-prod": """
forbid(principal, action, resource)
  when { principal.workspace == "sandbox" && resource.workspace == "prod" };""",
    "contractors-in-their-workspace": """
forbid(principal, action, resource)
  when { principal.name like "contractor-*" && principal.workspace != resource.workspace };""",
    "offered-capabilities-only": """
forbid(principal, action == AgentBus::Action::"request_task", resource)
  unless { resource.capabilities.contains(context.capability) };""",
    "high-priority-from-ops": """
forbid(principal, action == AgentBus::Action::"send", resource)
  when { context.priority == "high" && principal.workspace != "ops" };""",
}


async def install(database_url: str, tenant_id: uuid.UUID, policy_set: str) -> None:
    """Write ``policy_set``'s policies beside the tenant's default one."""
    if policy_set == "default":
        return
    pool = await db.open_app_pool(database_url, max_size=1)
    try:
        operator = Ctx(pool, Actor.operator("cli:bench"))
        for name, cedar in REALISTIC.items():
            await actions.create_policy(
                operator, tenant_id, name=name, cedar=cedar.strip(), workspace_id=None
            )
    finally:
        await pool.close()
