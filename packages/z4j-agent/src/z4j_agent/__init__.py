"""z4j agent: captures Celery task and worker events, redacts them, keeps them in a durable local
buffer and ships them to a z4j brain over wire protocol v2.

For a Celery app, two lines: ``from z4j_agent.celery import install`` and ``install(app)``.

Names are imported on first use, so the brain can import ``z4j_agent.redaction`` or
``z4j_agent.protocol`` without loading the transport and its WebSocket client.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from z4j_agent.agent import Agent
    from z4j_agent.buffer import EventBuffer
    from z4j_agent.config import AgentConfig, ConfigError, load_config
    from z4j_agent.events import EVENT_KINDS, make_event, new_event_id, redact_event_data
    from z4j_agent.identity import AGENT_VERSION, ProcessIdentity
    from z4j_agent.redaction import REDACTED, find_secrets, redact, redact_text
    from z4j_agent.transport import Transport

__version__ = "0.1.0"

_EXPORTS = {
    "AGENT_VERSION": "identity",
    "Agent": "agent",
    "AgentConfig": "config",
    "ConfigError": "config",
    "EVENT_KINDS": "events",
    "EventBuffer": "buffer",
    "ProcessIdentity": "identity",
    "REDACTED": "redaction",
    "Transport": "transport",
    "find_secrets": "redaction",
    "load_config": "config",
    "make_event": "events",
    "new_event_id": "events",
    "redact": "redaction",
    "redact_event_data": "events",
    "redact_text": "redaction",
}

__all__ = [
    "AGENT_VERSION",
    "EVENT_KINDS",
    "REDACTED",
    "Agent",
    "AgentConfig",
    "ConfigError",
    "EventBuffer",
    "ProcessIdentity",
    "Transport",
    "__version__",
    "find_secrets",
    "load_config",
    "make_event",
    "new_event_id",
    "redact",
    "redact_event_data",
    "redact_text",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'z4j_agent' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"z4j_agent.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
