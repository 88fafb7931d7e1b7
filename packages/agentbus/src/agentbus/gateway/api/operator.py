"""The platform operator over the API (04-API-SPEC §1.2, §10.1): ``POST /v1/tenants`` and
``GET /v1/tenants`` take ``Authorization: Bearer <AGENTBUS_PLATFORM_TOKEN>``. The presented
value and the configured one are compared as SHA-256 digests in constant time; without a
configured token every caller is refused (AB-1002), as for any other unknown bearer. The acting
platform actor is ``api:operator`` in ``audit_actions``."""

from __future__ import annotations

import hashlib
import hmac

from starlette.requests import HTTPConnection

from agentbus.actions import tenants
from agentbus.actions.context import Actor, Ctx
from agentbus.actions.users import OwnerSpec
from agentbus.errors import TokenInvalid
from agentbus.gateway.api.auth import bearer_of, client_ip
from agentbus.gateway.api.bodies import Body
from agentbus.gateway.context import Gateway

OPERATOR = "api:operator"


class OwnerBody(Body):
    email: str
    idp: str
    idp_subject: str
    display_name: str | None = None


class NewTenant(Body):
    slug: str
    display_name: str
    plan: str = "starter"
    region: str = "eu-west"
    owner: OwnerBody


def authenticate_operator(gw: Gateway, conn: HTTPConnection) -> Ctx:
    presented = hashlib.sha256(bearer_of(conn).encode()).digest()
    configured = gw.settings.platform_token
    expected = hashlib.sha256(
        (configured.get_secret_value() if configured else "").encode()
    ).digest()
    if configured is None or not hmac.compare_digest(presented, expected):
        raise TokenInvalid("this route takes the platform operator's token")
    return Ctx(gw.pool, Actor.operator(OPERATOR), keyring=gw.keyring, ip=client_ip(conn),
               user_agent=conn.headers.get("user-agent"))  # fmt: skip


async def create_tenant(ctx: Ctx, body: NewTenant) -> tenants.CreatedTenant:
    owner = body.owner
    return await tenants.create_tenant(
        ctx, slug=body.slug, display_name=body.display_name, plan=body.plan, region=body.region,
        owner=OwnerSpec(owner.email, owner.idp, owner.idp_subject, owner.display_name),
    )  # fmt: skip
