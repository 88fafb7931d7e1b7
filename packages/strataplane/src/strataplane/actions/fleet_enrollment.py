"""Enrollment: tokens that operators create (``spn_``, shown once), and the exchange of such a
token for a per-agent credential (``spt_`` for Telegraf, shown once).

Enrolling creates or reuses the host (by name), sets its ``enrollment`` labels from the token,
creates the agent instance (``approved_at`` NULL when the token requires approval) and its
credential. An instance enrolling again under the same id gets a new credential; the old one
is revoked. Modes ``class`` and ``pair`` are refused until they are built.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from uuid import UUID

from platformkit.db.scope import platform_transaction, tenant_transaction
from platformkit.ids import uuid7
from platformkit.tokens import InvalidTokenError, TokenFormat, mint_token, parse_token, sha256_hex

from strataplane.actions import fleet_errors as fe
from strataplane.actions.access import check_tenant, tenant_tx
from strataplane.actions.context import Ctx, Services
from strataplane.actions.fleet_inventory import relabel_host
from strataplane.db import SCOPE
from strataplane.domain.fleet_labels import LabelError, check_labels
from strataplane.store import audit, fleet_agents, fleet_enrollment, fleet_hosts, fleet_notify
from strataplane.store.fleet_enrollment import EnrollmentToken

ENROLLMENT_FORMAT = TokenFormat.encoded("spn_", nbytes=32, encoding="base32", display_length=4)
TELEGRAF_FORMAT = TokenFormat.encoded("spt_", nbytes=32, encoding="base32", display_length=4)


@dataclass(frozen=True)
class CreatedEnrollmentToken:
    token: EnrollmentToken
    plaintext: str


@dataclass(frozen=True)
class Enrolled:
    tenant_id: UUID
    agent_id: UUID
    host_id: UUID
    external_id: str
    credential: str
    approved: bool


def labels_or_422(labels: dict[str, Any], source: str) -> dict[str, str]:
    try:
        return check_labels(labels, source)
    except LabelError as exc:
        raise fe.InvalidLabels(str(exc), field=f"labels.{exc.key}") from None


async def create_enrollment_token(
    ctx: Ctx,
    name: str,
    *,
    agent_kind: str = "telegraf",
    labels: dict[str, Any] | None = None,
    host_kind: str = "server",
    mode: str = "enroll",
    requires_approval: bool = False,
    max_uses: int | None = None,
    expires_at: datetime | None = None,
) -> CreatedEnrollmentToken:
    if mode != "enroll" or agent_kind != "telegraf":
        raise fe.UnsupportedMode("only mode enroll for telegraf is built so far", field="mode")
    checked = labels_or_422(labels or {}, "enrollment")
    minted = mint_token(ENROLLMENT_FORMAT)
    async with tenant_tx(ctx) as tx:
        tx.require("enrollment_token.manage")
        token = await fleet_enrollment.insert_token(
            tx.conn,
            uuid7(),
            tx.tenant_id,
            token_hash=bytes.fromhex(minted.hash),
            name=name,
            agent_kind=agent_kind,
            token_prefix=minted.display_prefix,
            labels=checked,
            host_kind=host_kind,
            mode=mode,
            requires_approval=requires_approval,
            max_uses=max_uses,
            expires_at=expires_at,
            created_by=ctx.user_id,
        )
        await tx.audit("enrollment_token.create", "enrollment_token", token.id, {"name": name})
    return CreatedEnrollmentToken(token, minted.plaintext)


async def list_enrollment_tokens(ctx: Ctx) -> list[EnrollmentToken]:
    async with tenant_tx(ctx) as tx:
        tx.require("enrollment_token.manage")
        return await fleet_enrollment.list_tokens(tx.conn, tx.tenant_id)


async def revoke_enrollment_token(ctx: Ctx, token_id: UUID) -> EnrollmentToken:
    async with tenant_tx(ctx) as tx:
        tx.require("enrollment_token.manage")
        token = await fleet_enrollment.revoke_token(tx.conn, tx.tenant_id, token_id)
        if token is None:
            raise fe.EnrollmentTokenNotFound()
        await tx.audit("enrollment_token.revoke", "enrollment_token", token_id)
    return token


async def enroll_agent(
    services: Services,
    token: str,
    *,
    instance_id: str,
    hostname: str,
    source_ip: str | None = None,
    agent_url: str,
) -> Enrolled:
    """Exchange an enrollment token for an agent credential (no user: the token is the proof)."""
    try:
        parse_token(ENROLLMENT_FORMAT, token)
    except InvalidTokenError:
        raise fe.EnrollmentRejected("malformed enrollment token") from None
    async with platform_transaction(services.pool, SCOPE) as conn:
        found = await fleet_enrollment.lookup(conn, bytes.fromhex(sha256_hex(token)))
    if found is None:
        raise fe.EnrollmentRejected()
    async with tenant_transaction(services.pool, SCOPE, found.tenant_id) as conn:
        await check_tenant(conn, found.tenant_id)
        if not await fleet_enrollment.take_use(conn, found.tenant_id, found.id):
            raise fe.EnrollmentRejected()
        t = found.tenant_id
        host = await fleet_hosts.ensure_host(conn, t, hostname, found.host_kind)
        agent = await fleet_agents.find_agent(conn, t, found.agent_kind, instance_id)
        if agent is None:
            agent_id = uuid7()
            approved = None if found.requires_approval else datetime.now(UTC)
            await fleet_agents.insert_agent(
                conn,
                t,
                agent_id,
                host_id=host.id,
                kind=found.agent_kind,
                external_id=instance_id,
                token_id=found.id,
                approved_at=approved,
                ip=source_ip,
            )
        else:
            agent_id, approved = agent.id, agent.approved_at
        await fleet_hosts.replace_labels(conn, t, host.id, "enrollment", dict(found.labels))
        await relabel_host(conn, t, host.id, agent_url)
        minted = mint_token(TELEGRAF_FORMAT)
        revoked = await fleet_agents.revoke_credentials(conn, t, agent_id)
        await fleet_notify.credentials_revoked(conn, revoked)
        await fleet_agents.insert_credential(
            conn, t, uuid7(), agent_id, minted.display_prefix, bytes.fromhex(minted.hash)
        )
        event = audit.Event(
            "agent",
            str(agent_id),
            "agent.enroll",
            "agent_instance",
            str(agent_id),
            source_ip=source_ip,
            details={
                "enrollment_token": str(found.id),
                "host": hostname,
                "external_id": instance_id,
            },
        )
        await audit.append(conn, t, event)
    return Enrolled(t, agent_id, host.id, instance_id, minted.plaintext, approved is not None)
