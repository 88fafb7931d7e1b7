"""An agent's keys (04-API-SPEC §2.2, §2.4): list them, add one (rotation), revoke one.

A key lives 90 days (``registration.KEY_LIFETIME``); the sidecar adds a new one when a third of
that is left and signs with it from then on. Old and new are both usable until the old one
expires or is revoked, so envelopes already signed and queued with the old key still go out.

- Listing: the agent itself, another agent that may see it (conventions §2), or an integration
  token of its tenant (and workspace, for a token bound to one).
- Adding: the agent itself (AB-1008 for another), with a credential issued for a key that is
  still usable (AB-1010); or a managing token of its owner or of an admin of its workspace,
  which is how an agent whose key was revoked or has expired gets a new one and keeps its
  address. Either way with a key proof by the new key (``sub`` = the agent id, no ``kid``).
  Adding a key the agent already holds answers that key again (200), so a sidecar that crashed
  after the gateway took its new key can ask again; a revoked key is not taken back (AB-8008).
  At most ``MAX_USABLE_KEYS`` usable keys at a time (AB-8008). Every key of an agent has its
  ``spiffe_id``.
- Revoking: the agent itself (AB-1008 for another), or a token of its owner or of an admin of
  its workspace. The agent's last usable key cannot be revoked (AB-8008): revoke after adding
  its successor.

Adding and revoking lock the agent's keys, write an ``audit_actions`` row, and take effect on
every gateway instance within a second (``directory``). AB-8002 for an agent or key the caller
may not see, as for one that does not exist.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

from platformkit.db.scope import tenant_transaction
from platformkit.ids import uuid7
from pydantic import Field

from agentbus.db import SCOPE
from agentbus.errors import NotFound, StateConflict
from agentbus.gateway.actions.agent_access import check_acting
from agentbus.gateway.actions.agent_directory import find_visible_agent
from agentbus.gateway.actions.audit import record_api_action
from agentbus.gateway.actions.registration import KEY_LIFETIME
from agentbus.gateway.api.auth import Reader
from agentbus.gateway.api.bodies import Body
from agentbus.gateway.api.principals import AgentPrincipal
from agentbus.gateway.api.views import key_view, ts
from agentbus.gateway.context import Gateway
from agentbus.gateway.domain.agent_spec import fingerprint, key_usable, public_key_of
from agentbus.gateway.domain.errors import KeyUnusable
from agentbus.gateway.domain.proofs import verify_key_proof
from agentbus.gateway.domain.wire import b64url_encode
from agentbus.gateway.store import agents
from agentbus.ids import InvalidId, format_id, parse_id

MAX_USABLE_KEYS = 5
Row = dict[str, Any]


class NewKey(Body):
    public_key: str = Field(max_length=64)
    proof: str = Field(max_length=4096)


def full_key_view(key: Row) -> dict[str, Any]:
    return {
        **key_view(key),
        "created_at": ts(key["created_at"]),
        "revoked_at": ts(key["revoked_at"]),
        "public_key": b64url_encode(bytes(key["public_key"])),
    }


def _key_id(text: str) -> uuid.UUID:
    try:
        return parse_id("key", text)
    except InvalidId as exc:
        raise NotFound(f"no key {text}") from exc


async def list_keys(gw: Gateway, who: Reader, agent_ref: str) -> list[dict[str, Any]]:
    async with tenant_transaction(gw.pool, SCOPE, who.tenant_id) as conn:
        agent = await find_visible_agent(conn, who, agent_ref)
        keys = await agents.keys_of_agent(conn, who.tenant_id, agent["id"])
    return [full_key_view(key) for key in keys]


async def add_key(
    gw: Gateway, who: Reader, agent_ref: str, body: NewKey
) -> tuple[dict[str, Any], bool]:
    """The new key's view, and whether it was added now (False: the agent held it already)."""
    raw, public = public_key_of(body.public_key)
    tid, now = who.tenant_id, datetime.now(UTC)
    async with tenant_transaction(gw.pool, SCOPE, tid) as conn:
        agent = await find_visible_agent(conn, who, agent_ref)
        await check_acting(conn, who, agent, "add keys")
        keys = await agents.keys_of_agent(conn, tid, agent["id"], lock=True)
        if isinstance(who, AgentPrincipal):
            signing = next((k for k in keys if k["id"] == who.key_id), None)
            if signing is None or not key_usable(signing, now):
                raise KeyUnusable("the credential's key is revoked or expired; it cannot add keys")
        verify_key_proof(
            body.proof, public, subject=format_id("agt", agent["id"]), replay=gw.proofs
        )
        held = next((k for k in keys if bytes(k["public_key"]) == raw), None)
        if held is not None:
            if held["revoked_at"] is not None:
                raise StateConflict("this key was revoked; a revoked key is not taken back")
            return full_key_view(held), False
        if sum(key_usable(k, now) for k in keys) >= MAX_USABLE_KEYS:
            raise StateConflict(
                f"an agent holds at most {MAX_USABLE_KEYS} usable keys; revoke one first"
            )
        key = await agents.insert_key(
            conn, tid, key_id=uuid7(), agent_id=agent["id"], public_key=raw,
            fingerprint=fingerprint(raw), spiffe_id=keys[0]["spiffe_id"],
            expires_at=now + KEY_LIFETIME,
        )  # fmt: skip
        await record_api_action(
            conn, gw, who, "agent.key.add", target_type="agent_key",
            target_id=format_id("key", key["id"]), details=_key_details(agent, key),
        )  # fmt: skip
    return full_key_view(key), True


async def revoke_key(gw: Gateway, who: Reader, agent_ref: str, key_ref: str) -> None:
    tid, now = who.tenant_id, datetime.now(UTC)
    key_id = _key_id(key_ref)
    async with tenant_transaction(gw.pool, SCOPE, tid) as conn:
        agent = await find_visible_agent(conn, who, agent_ref)
        await check_acting(conn, who, agent, "revoke keys")
        keys = await agents.keys_of_agent(conn, tid, agent["id"], lock=True)
        key = next((k for k in keys if k["id"] == key_id), None)
        if key is None:
            raise NotFound(f"no key {key_ref}")
        if key["revoked_at"] is not None:
            return  # revoked already: the same end state
        if not any(key_usable(k, now) for k in keys if k["id"] != key_id):
            raise StateConflict("this is the agent's last usable key; add its successor first")
        revoked = await agents.revoke_key(conn, tid, key_id)
        assert revoked is not None  # locked above, and not revoked yet
        await record_api_action(
            conn, gw, who, "agent.key.revoke", target_type="agent_key",
            target_id=format_id("key", key_id), details=_key_details(agent, revoked),
        )  # fmt: skip


def _key_details(agent: Row, key: Row) -> dict[str, Any]:
    return {"agent": format_id("agt", agent["id"]), "fingerprint": key["fingerprint"]}
