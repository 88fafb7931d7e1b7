"""Request and response bodies of the REST API (they are the OpenAPI document's schemas)."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from pydantic import AliasChoices, BaseModel, ConfigDict, Field

from z4j.domain.roles import Role


class _Out(BaseModel):
    model_config = ConfigDict(from_attributes=True)


class LoginIn(BaseModel):
    email: str = Field(max_length=320)
    password: str = Field(max_length=1024)


class UserOut(_Out):
    id: uuid.UUID
    email: str
    display_name: str | None
    is_admin: bool


class UserIn(BaseModel):
    email: str = Field(max_length=320)
    password: str = Field(max_length=1024)
    display_name: str | None = Field(None, max_length=200)
    is_admin: bool = False


class ProjectIn(BaseModel):
    name: str = Field(min_length=1, max_length=200)


class ProjectOut(_Out):
    id: uuid.UUID
    name: str
    role: Role | None = Field(description="The role the caller acts with in this project.")
    created_at: datetime


class ProjectDetail(ProjectOut):
    settings: dict[str, Any]
    task_counts_24h: dict[str, int] = Field(description="Tasks created in the last 24 h by state.")
    agents_online: int
    agents_total: int


class MemberIn(BaseModel):
    email: str = Field(max_length=320)
    role: Role


class MemberOut(_Out):
    user_id: uuid.UUID
    email: str
    display_name: str | None
    role: Role
    created_at: datetime


class OwnerIn(BaseModel):
    email: str = Field(max_length=320)


class MemberRoleIn(BaseModel):
    role: Role


class InvitationIn(BaseModel):
    email: str = Field(max_length=320)
    role: Role


class InvitationOut(_Out):
    id: uuid.UUID
    email: str
    role: Role
    expires_at: datetime
    created_at: datetime


class AcceptIn(BaseModel):
    token: str = Field(max_length=200, description="The token of the invitation link.")
    password: str | None = Field(
        None,
        max_length=1024,
        description="Only without a session: the password of the account created for the "
        "invited email (which must not have one yet).",
    )
    display_name: str | None = Field(None, max_length=200)


class AcceptOut(BaseModel):
    project_id: uuid.UUID


class AgentIn(BaseModel):
    name: str = Field(min_length=1, max_length=200)


class AgentOut(_Out):
    id: uuid.UUID
    name: str
    state: str = Field(description="online, offline or unknown")
    last_seen_at: datetime | None
    last_connect_at: datetime | None
    protocol_version: str | None
    framework_adapter: str | None
    engine_adapters: list[str]
    scheduler_adapters: list[str]
    metadata: dict[str, Any]
    created_at: datetime


class AgentCreated(BaseModel):
    agent: AgentOut
    token: str = Field(description="Shown once; only its HMAC is stored.")
    hmac_secret: str = Field(description="The project's frame-signing secret (Z4J_HMAC_SECRET).")
    brain_url: str
    env: dict[str, str]
    env_lines: list[str] = Field(description="Lines for the worker's environment.")
    install_snippet: str


class TaskOut(_Out):
    id: uuid.UUID
    engine: str
    engine_task_id: str | None
    name: str | None
    queue: str | None
    state: str
    agent_id: uuid.UUID | None
    agent_name: str | None
    worker: str | None
    retries: int
    runtime_ms: float | None
    enqueued_at: datetime | None
    started_at: datetime | None
    finished_at: datetime | None
    created_at: datetime
    updated_at: datetime


class TaskPage(BaseModel):
    items: list[TaskOut]
    next_cursor: str | None = Field(description="Older tasks: pass as cursor.")
    prev_cursor: str | None = Field(description="Newer tasks: pass as cursor.")
    search_since: datetime | None = Field(
        None, description="The start of the window q searched when no since was given."
    )


class TaskError(BaseModel):
    exc_type: str | None = None
    exc_msg: str | None = None
    traceback_redacted: str | None = None


class EventOut(_Out):
    id: uuid.UUID
    event_type: str
    ts: datetime = Field(description="The agent's clock.")
    created_at: datetime = Field(description="When the brain received it.")
    agent_id: uuid.UUID | None
    payload: dict[str, Any]


class TaskDetailOut(TaskOut):
    # Named through aliases: a field called "kwargs" would shadow the model's own __init__.
    args_redacted: Any = Field(
        None,
        validation_alias=AliasChoices("args", "args_redacted"),
        serialization_alias="args",
        description="Redacted at ingest.",
    )
    kwargs_redacted: Any = Field(
        None,
        validation_alias=AliasChoices("kwargs", "kwargs_redacted"),
        serialization_alias="kwargs",
        description="Redacted at ingest.",
    )
    error: TaskError | None
    retried_as: uuid.UUID | None
    retry_of: uuid.UUID | None = Field(None, description="The task this one retries.")
    group_id: str | None
    state_at: datetime | None
    events: list[EventOut]
