"""Enrollment: tokens that operators create (``spn_``, shown once), and the exchange of such a
token for a per-agent credential (``spt_`` for Telegraf, ``spv_`` for Vector, shown once).

Enrolling creates or reuses the host (by name), sets its ``enrollment`` labels from the token,
creates the agent instance (``approved_at`` NULL when the token requires approval) and its
credential. An instance enrolling again under the same id gets a new credential; the old one
is revoked. A Telegraf token of mode ``class`` is itself the shared credential of its members
(agents/telegraf.md §7): joining creates the member (``external_id`` = its host name) and issues
nothing. Mode ``pair`` is refused until it is built.
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol
from uuid import UUID

from platformkit.db.scope import Conn, Pool, platform_transaction, tenant_transaction
from platformkit.ids import uuid7
from platformkit.tokens import InvalidTokenError, TokenFormat, mint_token, parse_token, sha256_hex

from strataplane.actions import fleet_errors as fe
from strataplane.actions.access import check_tenant, tenant_tx
from strataplane.actions.context import Ctx, Services
from strataplane.actions.fleet_inventory import relabel_host
from strataplane.db import SCOPE
from strataplane.domain.fleet_labels import LabelError, check_labels
from strataplane.store import (
    audit,
    fleet_agents,
    fleet_elastic,
    fleet_enrollment,
    fleet_hosts,
    fleet_notify,
)
from strataplane.store.fleet_enrollment import EnrollmentToken

ENROLLMENT_FORMAT = TokenFormat.encoded("spn_", nbytes=32, encoding="base32", display_length=4)
TELEGRAF_FORMAT = TokenFormat.encoded("spt_", nbytes=32, encoding="base32", display_length=4)
VECTOR_FORMAT = TokenFormat.encoded("spv_", nbytes=32, encoding="base32", display_length=4)
ELASTIC_FORMAT = TokenFormat.encoded("spe_", nbytes=32, encoding="base32", display_length=4)
CREDENTIAL_FORMATS = {
    "telegraf": TELEGRAF_FORMAT,
    "vector": VECTOR_FORMAT,
    "elastic-agent": ELASTIC_FORMAT,
}


class HasPool(Protocol):
    """What enrolling needs of the process: its pool (the agents' front has no Services)."""

    @property
    def pool(self) -> Pool: ...


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
    if mode == "class" and agent_kind != "telegraf":
        raise fe.UnsupportedMode("mode class is for Telegraf only", field="mode")
    if mode == "class" and requires_approval:
        # members join by their first heartbeat; the class config serves every one of them
        raise fe.UnsupportedMode("a class token cannot require approval", field="mode")
    if mode not in ("enroll", "class") or agent_kind not in CREDENTIAL_FORMATS:
        kinds = " and ".join(CREDENTIAL_FORMATS)
        raise fe.UnsupportedMode(
            f"only modes enroll (for {kinds}) and class (Telegraf) are built so far",
            field="mode",
        )
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
        if token.mode == "class":  # the agents' shared credential: every replica drops it
            digest = await fleet_enrollment.hash_of(tx.conn, tx.tenant_id, token_id)
            await fleet_notify.credentials_revoked(tx.conn, [digest] if digest else [])
        await tx.audit("enrollment_token.revoke", "enrollment_token", token_id)
    return token


async def _check_replace_token(
    conn: Conn, tenant_id: UUID, agent_id: UUID, given: str | None
) -> None:
    """An Elastic Agent id enrolled before is re-bound only with the replace_token it enrolled
    with (as Fleet Server: no token then, or none now, or another one: 403)."""
    stored = await fleet_elastic.replace_token_hash(conn, tenant_id, agent_id)
    digest = hashlib.sha256(given.encode()).digest() if given else b""
    if stored is None or not hmac.compare_digest(stored, digest):
        raise fe.AgentNotReplaceable()


async def enroll_agent(
    services: Services | HasPool,
    token: str,
    *,
    instance_id: str,
    hostname: str,
    source_ip: str | None = None,
    agent_url: str,
    kind: str = "telegraf",
    replace_token: str | None = None,
) -> Enrolled:
    """Exchange an enrollment token for an agent credential (no user: the token is the proof)."""
    try:
        parse_token(ENROLLMENT_FORMAT, token)
    except InvalidTokenError:
        raise fe.EnrollmentRejected("malformed enrollment token") from None
    pool = services.pool
    async with platform_transaction(pool, SCOPE) as conn:
        found = await fleet_enrollment.lookup(conn, bytes.fromhex(sha256_hex(token)))
    if found is None:
        raise fe.EnrollmentRejected()
    if found.agent_kind != kind:
        raise fe.EnrollmentRejected(f"this enrollment token enrolls {found.agent_kind} agents")
    if found.mode == "class":
        async with tenant_transaction(pool, SCOPE, found.tenant_id) as conn:
            await check_tenant(conn, found.tenant_id)
            member = await join_class(conn, found, hostname, source_ip, agent_url)
        return Enrolled(found.tenant_id, member.id, member.host_id, hostname, token, True)
    async with tenant_transaction(pool, SCOPE, found.tenant_id) as conn:
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
            if kind == "elastic-agent":
                await _check_replace_token(conn, t, agent_id, replace_token)
        if kind == "elastic-agent":
            digest = hashlib.sha256(replace_token.encode()).digest() if replace_token else None
            await fleet_elastic.set_replace_token(conn, t, agent_id, digest)
        await fleet_hosts.replace_labels(conn, t, host.id, "enrollment", dict(found.labels))
        await relabel_host(conn, t, host.id, agent_url)
        minted = mint_token(CREDENTIAL_FORMATS[kind])
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


@dataclass(frozen=True)
class ClassMember:
    id: UUID
    host_id: UUID


async def join_class(
    conn: Conn, token: EnrollmentToken, hostname: str, source_ip: str | None, agent_url: str
) -> ClassMember:
    """The member of class ``token`` on host ``hostname``, created (one use of the token) when
    it is new. A Telegraf of that host enrolled another way is not taken over (401)."""
    t = token.tenant_id
    agent = await fleet_agents.find_agent(conn, t, "telegraf", hostname)
    if agent is not None:
        if agent.enrollment_token_id != token.id:
            raise fe.EnrollmentRejected("this host's Telegraf is enrolled another way")
        return ClassMember(agent.id, agent.host_id)
    if not await fleet_enrollment.take_use(conn, t, token.id):
        raise fe.EnrollmentRejected()
    host = await fleet_hosts.ensure_host(conn, t, hostname, token.host_kind)
    agent_id = uuid7()
    await fleet_agents.insert_agent(
        conn,
        t,
        agent_id,
        host_id=host.id,
        kind="telegraf",
        external_id=hostname,
        token_id=token.id,
        approved_at=datetime.now(UTC),
        ip=source_ip,
    )
    await fleet_hosts.replace_labels(conn, t, host.id, "enrollment", dict(token.labels))
    await relabel_host(conn, t, host.id, agent_url)
    details = {"enrollment_token": str(token.id), "host": hostname, "class": True}
    event = audit.Event(
        "agent",
        str(agent_id),
        "agent.enroll",
        "agent_instance",
        str(agent_id),
        source_ip=source_ip,
        details=details,
    )
    await audit.append(conn, t, event)
    return ClassMember(agent_id, host.id)
