"""The policy hook of the send path (04-API-SPEC §4.1 step 10).

A ``SendPolicy`` sees who sends what to whom and answers allow or deny; the send action raises
AB-4001 on deny (with ``policy_id``) and AB-4002 when the policy set cannot be evaluated (fails
closed). Until Cedar policies land, ``AllowAll`` is the gateway's policy.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any, Protocol


@dataclass(frozen=True)
class SendRequest:
    tenant_id: uuid.UUID
    workspace_id: uuid.UUID
    sender: dict[str, Any]
    recipient: dict[str, Any]
    type: str
    capability: str | None
    conversation_id: uuid.UUID


@dataclass(frozen=True)
class Decision:
    allowed: bool
    policy_id: uuid.UUID | None = None
    reason: str | None = None


class PolicyError(Exception):
    """The policy set could not be evaluated (AB-4002)."""


class SendPolicy(Protocol):
    async def decide(self, request: SendRequest) -> Decision:
        """Allow or deny; raise ``PolicyError`` when no decision can be made."""
        ...


class AllowAll:
    async def decide(self, request: SendRequest) -> Decision:
        return Decision(True)
