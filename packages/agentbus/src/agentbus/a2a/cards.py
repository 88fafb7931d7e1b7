"""A2A agent cards (protocol 1.0 JSON, camelCase members of the ``AgentCard`` message): pure
functions of the ``agents`` rows and the gateway's public base URL.

An agent's card names its JSON-RPC interface, ``<base>/a2a/v1/agents/<agt>``, its capabilities as
skills (``id`` = capability name, the version in ``tags``), and bearer authentication (an
integration token). The tenant card at ``/.well-known/agent-card.json`` is the directory's
front: every agent the caller may see as skills ``<agent name>/<capability>``, reached through
the tenant's interface, ``<base>/a2a/v1``, whose ``SendMessage`` names the agent in
``message.metadata.agent``. The user's own members of a stored ``agents.agent_card`` are kept
beside the generated ones, which win.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from agentbus.gateway.domain.agent_spec import card_extra
from agentbus.ids import format_id

PROTOCOL_VERSION = "1.0"
MODES = ["text/plain", "application/json"]
_BEARER = {
    "httpAuthSecurityScheme": {
        "scheme": "Bearer",
        "description": "An AgentBus integration token (ab_live_..., ab_test_...) with 'send' "
        "for SendMessage and CancelTask, any scope for GetTask",
    }
}

Row = dict[str, Any]


def interface_url(base: str, agent_id: Any | None = None) -> str:
    tail = "" if agent_id is None else f"/agents/{format_id('agt', agent_id)}"
    return f"{base.rstrip('/')}/a2a/v1{tail}"


def _common(base: str, url: str) -> dict[str, Any]:
    return {
        "supportedInterfaces": [
            {"url": url, "protocolBinding": "JSONRPC", "protocolVersion": PROTOCOL_VERSION}
        ],
        "provider": {"organization": "AgentBus", "url": base.rstrip("/")},
        "capabilities": {"streaming": False, "pushNotifications": False},
        "securitySchemes": {"bearer": _BEARER},
        "securityRequirements": [{"schemes": {"bearer": {"list": []}}}],
        "defaultInputModes": MODES,
        "defaultOutputModes": MODES,
    }


def _skill(capability: Row, prefix: str = "") -> dict[str, Any]:
    name = f"{prefix}{capability['name']}"
    return {
        "id": name,
        "name": name,
        "description": capability.get("description") or name,
        "tags": [capability["name"], f"version:{capability.get('version', '1')}"],
    }


def agent_card(agent: Row, base: str) -> dict[str, Any]:
    """One agent's card."""
    generated = {
        "name": agent["display_name"] or agent["name"],
        "description": agent["description"] or f"AgentBus agent {agent['address']}",
        "version": agent["harness_version"] or "1",
        "skills": [_skill(c) for c in agent["capabilities"]],
        **_common(base, interface_url(base, agent["id"])),
    }
    return {**card_extra(agent["agent_card"] or {}), **generated}


def tenant_card(tenant: Row, agents: Sequence[Row], base: str) -> dict[str, Any]:
    """The tenant's card: the agents the caller may see, each capability a skill."""
    skills = [_skill(c, f"{a['name']}/") for a in agents for c in a["capabilities"]]
    return {
        "name": f"AgentBus {tenant['display_name']}",
        "description": "The agents of this AgentBus tenant; name the agent in "
        "message.metadata.agent (its address or name) and the capability in "
        "message.metadata.capability.",
        "version": "1",
        "skills": skills,
        **_common(base, interface_url(base)),
    }
