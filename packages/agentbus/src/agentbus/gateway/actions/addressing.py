"""Addresses and their resolution inside the caller's tenant (conventions §2).

``agent://<tenant slug>/<workspace slug>/<name>``, lowercase, nothing else. Resolution runs in
the sender's tenant scope, so an agent of another tenant is never looked up: a tenant segment
other than the sender's is AB-7001 before any query. Invisible and absent agents are the same
AB-3002; a disabled one is AB-3003.
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass
from typing import Any

from platformkit.db.scope import Conn

from agentbus.gateway.domain import errors as e
from agentbus.gateway.store import agents
from agentbus.gateway.store.directory import Directory

_ADDRESS = re.compile(r"^agent://([a-z0-9-]{3,40})/([a-z0-9-]{3,40})/([a-z0-9-]{3,40})$")
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")


@dataclass(frozen=True)
class Address:
    tenant: str
    workspace: str
    name: str


@dataclass(frozen=True)
class Sender:
    """What visibility rules need to know about the sending agent."""

    tenant_id: uuid.UUID
    agent_id: uuid.UUID
    workspace_id: uuid.UUID
    owner_user_id: uuid.UUID


def parse_address(text: Any, attribute: str = "recipient") -> Address:
    if not isinstance(text, str):
        raise e.AddressInvalid(f"{attribute} is not an address", attribute=attribute)
    match = _ADDRESS.match(text)
    if match is None:
        if _SCHEME.match(text) and not text.startswith("agent://"):
            raise e.SchemeNotSupported(f"only agent:// addresses are supported ({attribute})")
        raise e.AddressInvalid(f"{attribute} is not agent://<tenant>/<workspace>/<name>")
    return Address(*match.groups())


def visible(recipient: dict[str, Any], sender: Sender) -> bool:
    """Conventions §2 step 4."""
    scope = recipient["visibility"]
    if scope == "private":
        return bool(recipient["owner_user_id"] == sender.owner_user_id)
    if scope == "workspace":
        return bool(recipient["workspace_id"] == sender.workspace_id)
    return True  # tenant, and public (the same as tenant in the MVP)


async def resolve_recipient(
    conn: Conn, directory: Directory, tenant_slug: str, sender: Sender, text: Any
) -> dict[str, Any]:
    address = parse_address(text)
    if address.tenant != tenant_slug:
        raise e.CrossTenantNotEnabled("the recipient is in another tenant; bridging is post-MVP")
    agent = await directory.agent_by_address(conn, sender.tenant_id, text)
    if agent is None or not visible(agent, sender):
        raise e.RecipientNotFound(f"no agent {text}")
    if agent["status"] == "disabled":
        raise e.RecipientDisabled(f"{text} is disabled")
    return agent


async def check_reply_to(conn: Conn, tenant_slug: str, sender: Sender, text: Any) -> None:
    """``replyto`` must name a live agent of the same tenant (AB-3008)."""
    try:
        address = parse_address(text, "replyto")
    except (e.AddressInvalid, e.SchemeNotSupported) as exc:
        raise e.ReplyToInvalid(str(exc)) from None
    if address.tenant != tenant_slug:
        raise e.ReplyToInvalid("replyto must be an address in the sender's tenant")
    if await agents.agent_by_address(conn, sender.tenant_id, text) is None:
        raise e.ReplyToInvalid(f"no agent {text}")
