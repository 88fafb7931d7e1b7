"""Policies (04-API-SPEC §10.5): create, add a version, enable or disable, read, and the dry run
that replays recent messages against a draft. Tenant owners and admins; every write appends an
audit row (``policy.create``, ``policy.version``, ``policy.enable``, ``policy.disable``). The
caller drops the engine's cached sets of the tenant after a write (``PolicyEngine.invalidate``);
other processes see the change within ``POLICY_TTL_S``.
"""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass
from typing import Any

import psycopg
from platformkit.db.scope import Conn

from agentbus.actions.access import require_tenant_admin, tenant_scope
from agentbus.actions.audit import record_action
from agentbus.actions.context import Ctx
from agentbus.actions.validate import check_text
from agentbus.errors import AlreadyExists, NotFound, PolicyInvalid, RequestInvalid, RoleRequired
from agentbus.ids import format_id
from agentbus.policies import domain, store
from agentbus.policies.model import DEFAULT_CEDAR, DEFAULT_NAME, READ, action_of
from agentbus.store import workspaces

Row = dict[str, Any]
DRY_RUN_MAX = 1000


def _checked(cedar: str) -> str:
    try:
        domain.validate(cedar)
    except domain.PolicyInvalid as exc:
        raise PolicyInvalid("the Cedar text fails validation", errors=exc.errors) from None
    return cedar


async def _author(conn: Conn, ctx: Ctx, tenant_id: uuid.UUID) -> uuid.UUID:
    """``created_by``: the acting user, or for the platform the tenant's first owner."""
    if ctx.actor.user_id is not None:
        return ctx.actor.user_id
    owner = await store.first_owner(conn, tenant_id)
    if owner is None:
        raise RoleRequired("the tenant has no owner to author the policy")
    return owner


async def _live_workspace(conn: Conn, tenant_id: uuid.UUID, workspace_id: uuid.UUID) -> None:
    row = await workspaces.get_workspace(conn, tenant_id, workspace_id)
    if row is None or row["deleted_at"] is not None:
        raise NotFound(f"no workspace {format_id('ws', workspace_id)}")


async def create_default(conn: Conn, ctx: Ctx, tenant_id: uuid.UUID, author: uuid.UUID) -> Row:
    """The tenant's default policy (allow all, as AgentBus behaves without policies)."""
    row = await store.insert_policy(
        conn, tenant_id, workspace_id=None, name=DEFAULT_NAME, version=1, cedar=DEFAULT_CEDAR,
        enabled=True, created_by=author,
    )  # fmt: skip
    await record_action(
        conn, ctx, tenant_id, "policy.create", target_type="policy",
        target_id=format_id("pol", row["id"]), details={"name": DEFAULT_NAME, "version": 1},
    )  # fmt: skip
    return row


async def create_policy(
    ctx: Ctx, tenant_id: uuid.UUID, *, name: str, cedar: str, workspace_id: uuid.UUID | None
) -> Row:
    """Version 1 of a new policy, enabled: AB-4003 for text that fails validation, AB-8003 for
    a name taken in its scope. A tenant writing its first policy gets the default one with it,
    so adding a forbid never turns into denying everything."""
    name = check_text(name, "name", max_length=100)
    cedar = _checked(cedar)
    try:
        async with tenant_scope(ctx, tenant_id) as (conn, _tenant):
            await require_tenant_admin(conn, ctx, tenant_id)
            if workspace_id is not None:
                await _live_workspace(conn, tenant_id, workspace_id)
            author = await _author(conn, ctx, tenant_id)
            await store.lock_name(conn, tenant_id, workspace_id, name)
            if await store.versions(conn, tenant_id, workspace_id, name):
                raise AlreadyExists(f"a policy named {name!r} exists; add a version", field="name")
            if not await store.tenant_policies(conn, tenant_id) and name != DEFAULT_NAME:
                await create_default(conn, ctx, tenant_id, author)
            row = await store.insert_policy(
                conn, tenant_id, workspace_id=workspace_id, name=name, version=1, cedar=cedar,
                enabled=True, created_by=author,
            )  # fmt: skip
            await record_action(
                conn, ctx, tenant_id, "policy.create", target_type="policy",
                target_id=format_id("pol", row["id"]), details={"name": name, "version": 1},
            )  # fmt: skip
            return row
    except psycopg.errors.UniqueViolation as exc:
        raise AlreadyExists(f"a policy named {name!r} exists; add a version", field="name") from exc


async def _versions_of(conn: Conn, tenant_id: uuid.UUID, policy_id: uuid.UUID) -> list[Row]:
    """Every version of the policy that ``policy_id`` (any of its versions) names, locked."""
    row = await store.get_policy(conn, tenant_id, policy_id)
    if row is None:
        raise NotFound(f"no policy {format_id('pol', policy_id)}")
    await store.lock_name(conn, tenant_id, row["workspace_id"], row["name"])
    return await store.versions(conn, tenant_id, row["workspace_id"], row["name"])


async def add_version(ctx: Ctx, tenant_id: uuid.UUID, policy_id: uuid.UUID, cedar: str) -> Row:
    """Version n+1 of the policy, enabled; the earlier versions are kept."""
    cedar = _checked(cedar)
    async with tenant_scope(ctx, tenant_id) as (conn, _tenant):
        await require_tenant_admin(conn, ctx, tenant_id)
        newest = (await _versions_of(conn, tenant_id, policy_id))[-1]
        row = await store.insert_policy(
            conn, tenant_id, workspace_id=newest["workspace_id"], name=newest["name"],
            version=newest["version"] + 1, cedar=cedar, enabled=True,
            created_by=await _author(conn, ctx, tenant_id),
        )  # fmt: skip
        await record_action(
            conn, ctx, tenant_id, "policy.version", target_type="policy",
            target_id=format_id("pol", row["id"]),
            details={"name": row["name"], "version": row["version"]},
        )  # fmt: skip
        return row


async def set_enabled(ctx: Ctx, tenant_id: uuid.UUID, policy_id: uuid.UUID, enabled: bool) -> Row:
    """Enable or disable the newest version of the policy (what runs)."""
    async with tenant_scope(ctx, tenant_id) as (conn, _tenant):
        await require_tenant_admin(conn, ctx, tenant_id)
        newest = (await _versions_of(conn, tenant_id, policy_id))[-1]
        row = await store.set_enabled(conn, tenant_id, newest["id"], enabled)
        await record_action(
            conn, ctx, tenant_id, "policy.enable" if enabled else "policy.disable",
            target_type="policy", target_id=format_id("pol", row["id"]),
            details={"name": row["name"], "version": row["version"]},
        )  # fmt: skip
        return row


async def list_policies(ctx: Ctx, tenant_id: uuid.UUID) -> list[Row]:
    """The newest version of every policy, with how many versions it has."""
    async with tenant_scope(ctx, tenant_id) as (conn, _tenant):
        await require_tenant_admin(conn, ctx, tenant_id)
        rows = await store.tenant_policies(conn, tenant_id)
    newest: dict[tuple[Any, str], Row] = {}
    for row in rows:  # ordered by name, version
        key = (row["workspace_id"], row["name"])
        newest[key] = row | {"versions": newest.get(key, {}).get("versions", 0) + 1}
    return list(newest.values())


async def get_policy(ctx: Ctx, tenant_id: uuid.UUID, policy_id: uuid.UUID) -> tuple[Row, list[Row]]:
    """A policy version and every version of its policy."""
    async with tenant_scope(ctx, tenant_id) as (conn, _tenant):
        await require_tenant_admin(conn, ctx, tenant_id)
        row = await store.get_policy(conn, tenant_id, policy_id)
        if row is None:
            raise NotFound(f"no policy {format_id('pol', policy_id)}")
        return row, await store.versions(conn, tenant_id, row["workspace_id"], row["name"])


@dataclass(frozen=True)
class Refusal:
    message: Row
    action: str
    decision: domain.Decision


def _draft_set(rows: list[Row], draft: Row) -> list[Row]:
    """The tenant's policies with ``draft`` as the newest version of its name."""
    same = [r for r in rows if (r["workspace_id"], r["name"]) == (draft["workspace_id"],
                                                                  draft["name"])]  # fmt: skip
    version = max((r["version"] for r in same), default=0) + 1
    return [*rows, draft | {"version": version}]


async def dry_run(
    ctx: Ctx,
    tenant_id: uuid.UUID,
    *,
    cedar: str,
    name: str,
    workspace_id: uuid.UUID | None,
    last: int,
) -> tuple[int, list[Refusal]]:
    """Replays the tenant's last ``last`` messages (task requests and accepts among them) as
    they were sent and read, against the policies with ``cedar`` as the next version of
    ``name`` (a new policy if none has that name); nothing is stored. How many were replayed,
    and what the draft set would refuse."""
    if not 1 <= last <= DRY_RUN_MAX:
        raise RequestInvalid(f"last is 1 to {DRY_RUN_MAX}", field="last")
    name = check_text(name, "name", max_length=100)
    cedar = _checked(cedar)
    async with tenant_scope(ctx, tenant_id) as (conn, _tenant):
        await require_tenant_admin(conn, ctx, tenant_id)
        rows = await store.tenant_policies(conn, tenant_id)
        messages = await store.recent_messages(conn, tenant_id, last)
        ids = {m["from_agent_id"] for m in messages} | {m["to_agent_id"] for m in messages}
        agents = await store.agents_by_id(conn, tenant_id, list(ids))
    draft = {"id": None, "tenant_id": tenant_id, "workspace_id": workspace_id, "name": name,
             "cedar": cedar, "enabled": True}  # fmt: skip
    if not rows and name != DEFAULT_NAME:
        rows = [draft | {"id": None, "name": DEFAULT_NAME, "cedar": DEFAULT_CEDAR, "version": 1}]
    candidate = _draft_set(rows, draft)
    # Up to two decisions a message: off the event loop, so other requests go on meanwhile.
    refused = await asyncio.to_thread(_replay, candidate, messages, agents)
    return len(messages), refused


def _replay(candidate: list[Row], messages: list[Row], agents: dict[Any, Row]) -> list[Refusal]:
    sets: dict[Any, domain.Compiled] = {}
    refused: list[Refusal] = []
    for message in messages:
        sender, recipient = agents.get(message["from_agent_id"]), agents.get(message["to_agent_id"])
        if sender is None or recipient is None:
            continue
        for action, actor, other in ((action_of(message["type"]), sender, recipient),
                                     (READ, recipient, sender)):  # fmt: skip
            if action is None:
                continue
            ws = actor["workspace_id"]
            if ws not in sets:
                in_ws = [r for r in domain.in_force(candidate) if r["workspace_id"] in (None, ws)]
                sets[ws] = domain.compile_set(in_ws)
            decision = domain.decide(sets[ws], domain.Request(
                action=action, principal=actor, resource=other, type=message["type"],
                capability=message["capability"], size_bytes=message["payload_bytes"],
                attachments=0, attachment_bytes=0, priority=message["priority"],
                at=message["accepted_at"],
            ))  # fmt: skip
            if not decision.allowed:
                refused.append(Refusal(message, action, decision))
    return refused
