"""Agents of a project: list, create (the token is in this one response only), delete."""

from __future__ import annotations

import uuid

from fastapi import APIRouter, Request, Response, status

from z4j.actions import agents
from z4j.api.v1.deps import CtxDep, public_url
from z4j.api.v1.schemas import AgentCreated, AgentIn, AgentOut

router = APIRouter(tags=["agents"])


@router.get("/projects/{project_id}/agents", summary="The project's agents and their liveness")
async def list_agents(project_id: uuid.UUID, ctx: CtxDep) -> list[AgentOut]:
    _access, rows = await agents.list_agents(ctx, project_id)
    return [AgentOut.model_validate(row) for row in rows]


@router.post(
    "/projects/{project_id}/agents",
    status_code=status.HTTP_201_CREATED,
    summary="Configure an agent; answers its token and HMAC secret once",
)
async def create_agent(
    project_id: uuid.UUID, body: AgentIn, ctx: CtxDep, request: Request, response: Response
) -> AgentCreated:
    created = await agents.create_agent(ctx, project_id, body.name, public_url(request))
    response.headers["Cache-Control"] = "no-store"
    return AgentCreated(
        agent=AgentOut.model_validate(created.agent),
        token=created.token,
        hmac_secret=created.hmac_secret,
        brain_url=created.brain_url,
        env=created.env,
        env_lines=created.env_lines,
        install_snippet=agents.INSTALL_SNIPPET,
    )


@router.get("/projects/{project_id}/agents/{agent_id}", summary="One agent")
async def get_agent(project_id: uuid.UUID, agent_id: uuid.UUID, ctx: CtxDep) -> AgentOut:
    return AgentOut.model_validate(await agents.access_agent(ctx, project_id, agent_id))


@router.delete(
    "/projects/{project_id}/agents/{agent_id}",
    status_code=status.HTTP_204_NO_CONTENT,
    summary="Delete an agent; its token stops working and its connections close",
)
async def delete_agent(project_id: uuid.UUID, agent_id: uuid.UUID, ctx: CtxDep) -> None:
    await agents.delete_agent(ctx, project_id, agent_id)
