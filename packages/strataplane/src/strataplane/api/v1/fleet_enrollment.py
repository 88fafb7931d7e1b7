"""Enrollment tokens (operators) and the enrollment exchange (agents' installers).

``POST /api/v1/enroll/telegraf`` takes ``Authorization: Bearer spn_...`` and returns the agent's
``spt_`` credential once, with the command line that runs Telegraf against this server;
``POST /api/v1/enroll/vector`` the ``spv_`` credential with the bootstrap file of Vector's
``http`` provider (docs/strataplane/agents/vector.md). Neither
response takes an Idempotency-Key: no stored response may hold a credential.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal, Self
from uuid import UUID

from fastapi import APIRouter, Depends, Header, Request
from platformkit.http import no_idempotency_key
from platformkit.storable import PgInt
from pydantic import Field, field_validator

from strataplane import errors
from strataplane.actions import fleet_enrollment as enrollment
from strataplane.agents.settings import FleetSettings
from strataplane.agents.telegraf import CONFIG_PATH
from strataplane.agents.vector import CONFIG_PATH as VECTOR_CONFIG_PATH
from strataplane.agents.vector import bootstrap
from strataplane.api.deps import TenantCtx, request_meta, services_of
from strataplane.api.v1.common import Model
from strataplane.domain.hostnames import is_host_name

router = APIRouter(tags=["fleet"])
_NO_KEY = [Depends(no_idempotency_key)]


def fleet_settings(request: Request) -> FleetSettings:
    found: FleetSettings = request.app.state.fleet_settings
    return found


class EnrollmentTokenIn(Model):
    name: str = Field(min_length=1, max_length=200)
    agent_kind: Literal["telegraf", "vector", "elastic-agent"] = "telegraf"
    labels: dict[str, Any] = Field(default_factory=dict, description="Source 'enrollment'.")
    host_kind: Literal["server", "client", "pod"] = "server"
    mode: Literal["enroll", "class", "pair"] = "enroll"
    requires_approval: bool = False
    max_uses: PgInt | None = Field(None, ge=1)
    expires_at: datetime | None = None


class EnrollmentTokenOut(Model):
    id: UUID
    name: str
    agent_kind: str
    token_prefix: str
    labels: dict[str, Any]
    host_kind: str
    mode: str
    requires_approval: bool
    max_uses: int | None
    uses: int
    expires_at: datetime | None
    created_at: datetime
    revoked_at: datetime | None


class CreatedEnrollmentTokenOut(EnrollmentTokenOut):
    token: str = Field(description="The enrollment token itself, shown only in this response.")

    @classmethod
    def of(cls, created: enrollment.CreatedEnrollmentToken) -> Self:
        base = EnrollmentTokenOut.model_validate(created.token).model_dump()
        return cls(**base, token=created.plaintext)


@router.post("/enrollment-tokens", status_code=201, dependencies=_NO_KEY)
async def create_enrollment_token(
    ctx: TenantCtx, body: EnrollmentTokenIn
) -> CreatedEnrollmentTokenOut:
    created = await enrollment.create_enrollment_token(ctx, **body.model_dump())
    return CreatedEnrollmentTokenOut.of(created)


@router.get("/enrollment-tokens")
async def list_enrollment_tokens(ctx: TenantCtx) -> list[EnrollmentTokenOut]:
    found = await enrollment.list_enrollment_tokens(ctx)
    return [EnrollmentTokenOut.model_validate(t) for t in found]


@router.delete("/enrollment-tokens/{token_id}")
async def revoke_enrollment_token(ctx: TenantCtx, token_id: UUID) -> EnrollmentTokenOut:
    return EnrollmentTokenOut.model_validate(
        await enrollment.revoke_enrollment_token(ctx, token_id)
    )


class EnrollIn(Model):
    instance_id: str = Field(
        min_length=1, max_length=200, description="Telegraf instance_id / Vector instance id."
    )
    hostname: str = Field(
        min_length=1, max_length=254, description="FQDN or stable name (RFC 1123)."
    )

    @field_validator("hostname")
    @classmethod
    def _host_name(cls, value: str) -> str:
        if not is_host_name(value):
            raise ValueError("not an RFC 1123 host name")
        return value


class EnrolledOut(Model):
    agent_id: UUID
    host_id: UUID
    instance_id: str
    approved: bool
    credential: str = Field(
        description="The agent's spt_ (Telegraf) or spv_ (Vector) token, shown only here."
    )
    config_url: str
    environment: dict[str, str]
    command: str


async def _enroll(request: Request, body: EnrollIn, authorization: str | None, kind: str) -> Any:
    scheme, _, token = (authorization or "").partition(" ")
    if scheme.lower() != "bearer" or not token:
        raise errors.AuthRequired("use Authorization: Bearer <enrollment token>")
    settings = fleet_settings(request)
    meta = request_meta(request)
    runtime = getattr(request.app.state, "fleet", None)
    peer = request.client.host if request.client is not None else None
    forwarded = request.headers.get("x-forwarded-for")
    source = runtime.source_ip(peer, forwarded) if runtime is not None else meta.source_ip
    return await enrollment.enroll_agent(
        services_of(request),
        token.strip(),
        instance_id=body.instance_id,
        hostname=body.hostname,
        source_ip=source,
        agent_url=settings.agent_url,
        kind=kind,
    )


@router.post("/enroll/telegraf", status_code=201, dependencies=_NO_KEY)
async def enroll_telegraf(
    request: Request,
    body: EnrollIn,
    authorization: Annotated[str | None, Header(description="Bearer spn_...")] = None,
) -> EnrolledOut:
    done = await _enroll(request, body, authorization, "telegraf")
    url = fleet_settings(request).agent_url.rstrip("/") + CONFIG_PATH
    env = {
        "TELEGRAF_CONTROLLER_TOKEN": done.credential,  # Telegraf 1.39+, sent as Bearer
        "INFLUX_TOKEN": done.credential,  # before 1.39, sent as Token
        "STRATAPLANE_INSTANCE_ID": done.external_id,  # outputs.heartbeat instance_id
    }
    return EnrolledOut(
        agent_id=done.agent_id,
        host_id=done.host_id,
        instance_id=done.external_id,
        approved=done.approved,
        credential=done.credential,
        config_url=url,
        environment=env,
        command=f"telegraf --config {url} --config-url-watch-interval 30s",
    )


class VectorEnrolledOut(EnrolledOut):
    bootstrap: str = Field(
        description="The file that makes Vector load its configuration from this server."
    )


@router.post("/enroll/vector", status_code=201, dependencies=_NO_KEY)
async def enroll_vector(
    request: Request,
    body: EnrollIn,
    authorization: Annotated[str | None, Header(description="Bearer spn_...")] = None,
) -> VectorEnrolledOut:
    done = await _enroll(request, body, authorization, "vector")
    url = fleet_settings(request).agent_url.rstrip("/") + VECTOR_CONFIG_PATH
    env = {
        "STRATAPLANE_VECTOR_TOKEN": done.credential,  # provider and heartbeat sink, as Bearer
        "STRATAPLANE_INSTANCE_ID": done.external_id,  # the heartbeat sink's instance header
    }
    return VectorEnrolledOut(
        agent_id=done.agent_id,
        host_id=done.host_id,
        instance_id=done.external_id,
        approved=done.approved,
        credential=done.credential,
        config_url=url,
        environment=env,
        bootstrap=bootstrap(url),
        command="vector --config /etc/vector/strataplane.toml",
    )
