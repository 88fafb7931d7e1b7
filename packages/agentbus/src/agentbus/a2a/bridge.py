"""The A2A bridge of a workspace (docs/decisions/0032): an agent named ``a2a-bridge`` whose key
the gateway keeps (``a2a_bridges``, wrapped by the deployment keyring), so that a caller with an
integration token, which holds no agent key, can send signed envelopes through it.

``bridge_for`` finds or makes the bridge (its key replaced once less than a day is left of it)
and answers it as the sender of the send path: an ``AgentPrincipal`` whose token is the caller's
integration token (the receipt is issued to it), with the private key to sign envelopes.
Messages sent to the bridge (a task's answers) are kept as sent: the bridge has no consumer, and
A2A callers read a task's state with ``GetTask``.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from platformkit.db.scope import Conn, tenant_transaction
from platformkit.ids import uuid7
from wirekit import canonical_json

from agentbus import broker
from agentbus.db import SCOPE
from agentbus.gateway.actions.registration import KEY_LIFETIME
from agentbus.gateway.actions.signing import raw_public, unwrap_private_key, wrap_private_key
from agentbus.gateway.api.principals import AgentPrincipal
from agentbus.gateway.context import Gateway
from agentbus.gateway.domain.agent_spec import agent_card, fingerprint, key_usable
from agentbus.gateway.domain.wire import b64url_encode
from agentbus.gateway.store import agents
from agentbus.ids import format_id
from agentbus.store import tenants
from agentbus.store.integration_tokens import VerifiedToken

NAME = "a2a-bridge"
RENEW_BEFORE = timedelta(days=1)


@dataclass(frozen=True)
class Bridge:
    principal: AgentPrincipal
    key: Ed25519PrivateKey

    def sign(self, envelope: dict[str, Any]) -> dict[str, Any]:
        unsigned = {k: v for k, v in envelope.items() if k != "signature"}
        return {**unsigned, "signature": b64url_encode(self.key.sign(canonical_json(unsigned)))}


async def _new_key(
    conn: Conn, gw: Gateway, tenant: dict[str, Any], agent: dict[str, Any]
) -> tuple[uuid.UUID, bytes]:
    key, key_id = Ed25519PrivateKey.generate(), uuid7()
    raw = raw_public(key.public_key())
    ws, agt = format_id("ws", agent["workspace_id"]), format_id("agt", agent["id"])
    spiffe = f"spiffe://{tenant['slug']}.agentbus.exchange/ws/{ws}/agent/{agt}"
    await agents.insert_key(
        conn, tenant["id"], key_id=key_id, agent_id=agent["id"], public_key=raw,
        fingerprint=fingerprint(raw), spiffe_id=spiffe,
        expires_at=datetime.now(UTC) + KEY_LIFETIME,
    )  # fmt: skip
    return key_id, wrap_private_key(gw.keyring, str(key_id), key)


async def _create(
    conn: Conn, gw: Gateway, tenant: dict[str, Any], workspace: dict[str, Any], owner: uuid.UUID
) -> None:
    agent_id = uuid7()
    values: dict[str, Any] = {
        "id": agent_id, "workspace_id": workspace["id"], "owner_user_id": owner, "name": NAME,
        "address": f"agent://{tenant['slug']}/{workspace['slug']}/{NAME}",
        "display_name": "A2A bridge",
        "description": "Sends the messages of A2A clients to this workspace's agents",
        "capabilities": [], "harness": "custom", "harness_version": None, "mode": "service",
        "visibility": "workspace", "nats_consumer": broker.consumer_name(agent_id),
        "inbox_subject": broker.inbox_subject(tenant["id"], workspace["id"], agent_id),
        "delivery": {"strict_order": False}, "last_host": None,
    }  # fmt: skip
    values["agent_card"] = agent_card(values)
    agent = await agents.insert_agent(conn, tenant["id"], values)
    key_id, wrapped = await _new_key(conn, gw, tenant, agent)
    await conn.execute(
        """INSERT INTO a2a_bridges (tenant_id, workspace_id, agent_id, key_id, private_key_enc)
           VALUES (%s, %s, %s, %s, %s)""",
        (tenant["id"], workspace["id"], agent_id, key_id, wrapped),
    )


async def _load(conn: Conn, tenant_id: uuid.UUID, workspace_id: uuid.UUID) -> dict[str, Any] | None:
    cur = await conn.execute(
        """SELECT b.agent_id, b.key_id, b.private_key_enc, k.revoked_at, k.expires_at
             FROM a2a_bridges b JOIN agent_keys k ON k.tenant_id = b.tenant_id AND k.id = b.key_id
            WHERE b.tenant_id = %s AND b.workspace_id = %s FOR UPDATE OF b""",
        (tenant_id, workspace_id),
    )
    return await cur.fetchone()


async def bridge_for(gw: Gateway, token: VerifiedToken, workspace_id: uuid.UUID) -> Bridge:
    """The workspace's bridge, made on first use, sending for ``token``'s caller."""
    try:
        return await _bridge(gw, token, workspace_id)
    except psycopg.errors.UniqueViolation:  # two first calls at once: read the other's
        return await _bridge(gw, token, workspace_id)


async def _bridge(gw: Gateway, token: VerifiedToken, workspace_id: uuid.UUID) -> Bridge:
    tid = token.tenant_id
    async with tenant_transaction(gw.pool, SCOPE, tid) as conn:
        tenant = await tenants.get_tenant(conn, tid)
        assert tenant is not None  # the token was just verified in this tenant
        row = await _load(conn, tid, workspace_id)
        if row is None:
            workspace = await agents.workspace_by_id(conn, tid, workspace_id)
            assert workspace is not None  # the target agent's own workspace
            await _create(conn, gw, tenant, workspace, token.owner_user_id)
        elif not key_usable(row, datetime.now(UTC) + RENEW_BEFORE):
            agent = await agents.get_agent(conn, tid, row["agent_id"])
            assert agent is not None
            key_id, wrapped = await _new_key(conn, gw, tenant, agent)
            await conn.execute(
                "UPDATE a2a_bridges SET key_id = %s, private_key_enc = %s"
                " WHERE tenant_id = %s AND workspace_id = %s",
                (key_id, wrapped, tid, workspace_id),
            )
        row = await _load(conn, tid, workspace_id)
        assert row is not None
        agent = await agents.get_agent(conn, tid, row["agent_id"])
        assert agent is not None
    key = unwrap_private_key(gw.keyring, str(row["key_id"]), bytes(row["private_key_enc"]))
    principal = AgentPrincipal(
        tenant_id=tid, workspace_id=workspace_id, agent_id=agent["id"], key_id=row["key_id"],
        token_id=token.token_id, scopes=token.scopes, address=agent["address"],
        owner_user_id=agent["owner_user_id"], visibility=agent["visibility"],
        credential_expires_at=int(row["expires_at"].timestamp()),
    )  # fmt: skip
    return Bridge(principal, key)
