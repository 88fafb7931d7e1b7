"""Agent credentials: issue with an integration token, refresh with the current credential
(04-API-SPEC §3). Both need a fresh key proof by one of the agent's usable keys; the scopes are
the token's, intersected with ``{send, receive}``.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from platformkit.db.scope import Conn, tenant_transaction

from agentbus.db import SCOPE
from agentbus.errors import InsufficientScope, NotFound
from agentbus.gateway.actions import credentials
from agentbus.gateway.actions.agent_access import check_token_over_agent
from agentbus.gateway.api.bodies import Body
from agentbus.gateway.api.principals import AgentPrincipal
from agentbus.gateway.context import Gateway
from agentbus.gateway.domain.agent_spec import key_usable
from agentbus.gateway.domain.errors import AgentDisabled, KeyProofInvalid, KeyUnusable
from agentbus.gateway.domain.proofs import proof_header, verify_key_proof
from agentbus.gateway.store import agents
from agentbus.ids import InvalidId, format_id, parse_id
from agentbus.store import integration_tokens
from agentbus.store.integration_tokens import VerifiedToken


class ProofBody(Body):
    proof: str


def agent_scopes(scopes: frozenset[str] | list[str]) -> list[str]:
    return [s for s in credentials.AGENT_SCOPES if s in scopes]


async def _proven_key(
    gw: Gateway, conn: Conn, tenant_id: uuid.UUID, agent_id: uuid.UUID, proof: str
) -> uuid.UUID:
    """Check the proof against the agent key its header names; that key's id."""
    kid = proof_header(proof).get("kid")
    try:
        key_id = parse_id("key", kid if isinstance(kid, str) else "")
    except InvalidId as exc:
        raise KeyProofInvalid("the key proof's kid is not a key_ id") from exc
    key = await agents.get_key(conn, tenant_id, key_id)
    if key is None or key["agent_id"] != agent_id:
        raise KeyProofInvalid("the key proof names a key of another agent")
    if not key_usable(key, datetime.now(UTC)):
        raise KeyUnusable("the agent key is revoked or expired")
    public = Ed25519PublicKey.from_public_bytes(bytes(key["public_key"]))
    verify_key_proof(proof, public, subject=format_id("agt", agent_id), replay=gw.proofs)
    return key_id


async def issue_credential(
    gw: Gateway, token: VerifiedToken, agent_ref: str, proof: str
) -> dict[str, Any]:
    scopes = agent_scopes(token.scopes)
    if not scopes:
        raise InsufficientScope("issuing a credential needs the send or receive scope")
    try:
        agent_id = parse_id("agt", agent_ref)
    except InvalidId as exc:
        raise NotFound(f"no agent {agent_ref}") from exc
    tid = token.tenant_id
    async with tenant_transaction(gw.pool, SCOPE, tid) as conn:
        agent = await agents.get_agent(conn, tid, agent_id)
        if agent is None or agent["deleted_at"] is not None:
            raise NotFound(f"no agent {agent_ref}")
        await check_token_over_agent(conn, token, agent)
        if agent["status"] == "disabled":
            raise AgentDisabled("the agent is disabled")
        key_id = await _proven_key(gw, conn, tid, agent_id, proof)
    return credentials.mint(
        gw.signing,
        tenant_id=tid,
        workspace_id=agent["workspace_id"],
        agent_id=agent_id,
        token_id=token.token_id,
        key_id=key_id,
        scopes=scopes,
    )


async def refresh_credential(gw: Gateway, principal: AgentPrincipal, proof: str) -> dict[str, Any]:
    """The principal was authenticated by its current credential, so its token is still valid;
    scopes follow the token as it is now."""
    tid = principal.tenant_id
    async with tenant_transaction(gw.pool, SCOPE, tid) as conn:
        key_id = await _proven_key(gw, conn, tid, principal.agent_id, proof)
        token = await integration_tokens.get_token(conn, tid, principal.token_id)
    scopes = agent_scopes(list(token["scopes"]) if token else [])
    if not scopes:
        raise InsufficientScope("the token no longer has the send or receive scope")
    return credentials.mint(
        gw.signing,
        tenant_id=tid,
        workspace_id=principal.workspace_id,
        agent_id=principal.agent_id,
        token_id=principal.token_id,
        key_id=key_id,
        scopes=scopes,
    )
