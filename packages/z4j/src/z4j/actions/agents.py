"""Agents: configuring one (its token is shown once), listing, and deleting.

The token is minted with the brain's token format and stored only as its HMAC; the HMAC
secret agents sign frames with is derived per project from the brain's secrets, so showing it
again later is possible in principle, but the dashboard shows both only when the agent is made.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from platformkit.tokens import mint_token
from psycopg import errors as pg_errors
from z4j_agent.protocol import CLOSE_REVOKED, encode_secret

from z4j.actions import audit
from z4j.actions.access import ProjectAccess, project_scope
from z4j.actions.context import Ctx
from z4j.actions.errors import AgentNameTaken, AgentNotFound, InvalidInput
from z4j.brain import AGENT_TOKEN
from z4j.domain.notices import agent_sends_no_starts
from z4j.domain.roles import Permission
from z4j.store import agents as agent_store
from z4j.store import workers as worker_store

INSTALL_SNIPPET = "from z4j_agent.celery import install\ninstall(app)"


@dataclass(frozen=True)
class CreatedAgent:
    agent: dict[str, Any]
    token: str
    hmac_secret: str
    brain_url: str

    @property
    def env(self) -> dict[str, str]:
        return {
            "Z4J_BRAIN_URL": self.brain_url,
            "Z4J_TOKEN": self.token,
            "Z4J_HMAC_SECRET": self.hmac_secret,
            # The z4j-celery agent refuses to start without it; ours does not need it.
            "Z4J_PROJECT_ID": str(self.agent["project_id"]),
        }

    @property
    def env_lines(self) -> list[str]:
        return [f"{key}={value}" for key, value in self.env.items()]


def _clean_name(name: str) -> str:
    name = name.strip()
    if not 1 <= len(name) <= 200 or any(ch.isspace() and ch != " " for ch in name):
        raise InvalidInput("An agent name has 1 to 200 characters on one line.", field="name")
    return name


async def list_agents(
    ctx: Ctx, project_id: uuid.UUID
) -> tuple[ProjectAccess, list[dict[str, Any]]]:
    """The project's agents with their worker connections (``workers``); ``no_task_starts``
    marks one whose tasks never start (``z4j.domain.notices``)."""
    async with project_scope(ctx, project_id) as (conn, access):
        rows = await agent_store.list_for_project(conn, project_id)
        reports = await agent_store.start_reports(
            conn, project_id, ctx.brain.settings.no_start_after_seconds
        )
        workers = await worker_store.list_for_project(
            conn, project_id, ctx.brain.settings.offline_after_seconds
        )
    for row in rows:
        row["no_task_starts"] = agent_sends_no_starts(*reports.get(row["id"], (0, 0)))
        row["workers"] = [w for w in workers if w["agent_id"] == row["id"]]
    return access, rows


async def create_agent(ctx: Ctx, project_id: uuid.UUID, name: str, brain_url: str) -> CreatedAgent:
    name = _clean_name(name)
    minted = mint_token(AGENT_TOKEN, ctx.brain.token_hasher)
    async with project_scope(ctx, project_id, Permission.AGENT_MANAGE) as (conn, _access):
        try:
            async with conn.transaction():  # a savepoint: the outer transaction stays usable
                agent = await agent_store.create(conn, project_id, name, minted.hash)
        except pg_errors.UniqueViolation:
            raise AgentNameTaken(name=name) from None
        await audit.record(
            conn,
            ctx.brain,
            "agent.create",
            actor=ctx.actor_id,
            project_id=project_id,
            target_type="agent",
            target_id=agent["id"],
            details={"name": name, "token_prefix": minted.display_prefix},
        )
    await ctx.brain.notify_change()
    secret = encode_secret(ctx.brain.secrets.project_secret(project_id))
    return CreatedAgent(agent, minted.plaintext, secret, brain_url.rstrip("/"))


async def access_agent(ctx: Ctx, project_id: uuid.UUID, agent_id: uuid.UUID) -> dict[str, Any]:
    async with project_scope(ctx, project_id) as (conn, _access):
        agent = await agent_store.get(conn, project_id, agent_id)
    if agent is None:
        raise AgentNotFound(agent_id=str(agent_id))
    return agent


async def delete_agent(ctx: Ctx, project_id: uuid.UUID, agent_id: uuid.UUID) -> None:
    async with project_scope(ctx, project_id, Permission.AGENT_MANAGE) as (conn, _access):
        agent = await agent_store.get(conn, project_id, agent_id)
        if agent is None or not await agent_store.delete(conn, project_id, agent_id):
            raise AgentNotFound(agent_id=str(agent_id))
        await audit.record(
            conn,
            ctx.brain,
            "agent.delete",
            actor=ctx.actor_id,
            project_id=project_id,
            target_type="agent",
            target_id=agent_id,
            details={"name": agent["name"]},
        )
    # After commit: the token no longer authenticates, so end the connections it opened.
    for key, live in list(ctx.brain.live.items()):
        if key[0] == agent_id:
            await live.close(CLOSE_REVOKED, "agent deleted")
    await ctx.brain.notify_change()
