"""Authentication of gateway requests (04-API-SPEC §1.2).

- ``authenticate_token`` / ``require_token(scope)``: an integration token as Bearer
  (AB-1001..1004, AB-1013; AB-1007 without the scope).
- ``authenticate_agent`` / ``require_agent(scope)``: an agent credential as Bearer: the JWT
  (AB-1005, AB-1006), then the agent's current state: not disabled or deleted (AB-1014), tenant
  active (AB-1013), originating token neither revoked (AB-1003) nor expired (AB-1004); AB-1007
  without the scope (``require_agent_scope``, also for a credential checked elsewhere).
  Returns an ``AgentPrincipal``.
- ``authenticate_either``: either of the two (routes for agents and operators alike);
  ``authenticate_reader``: an agent credential, or a token with ``read_audit`` or ``admin``
  (AB-1007 without), for the routes that read messages.
- ``require_scopes`` / ``require_tenant_wide``: a token's scope check (AB-1007), and for rows
  that name no workspace also a token not bound to one (AB-1015).

``require_*`` are FastAPI dependencies; plain Starlette routes call ``authenticate_*`` directly.

Each takes a token from the request's rate bucket (04 §1.6, ``request_limits``) once the caller
is known: ``MANAGEMENT`` for a token and ``AGENT`` for a credential unless the route names
another (``limit=``), or none for the sends, which have their own (``send_limits``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import UTC, datetime

from starlette.requests import HTTPConnection

from agentbus.errors import (
    InsufficientScope,
    TenantSuspended,
    TokenExpired,
    TokenRevoked,
    Unauthenticated,
    WorkspaceMismatch,
)
from agentbus.gateway.actions import credentials
from agentbus.gateway.api.principals import AgentPrincipal
from agentbus.gateway.api.request_limits import Kind, note_quota
from agentbus.gateway.context import Gateway, get_gateway
from agentbus.gateway.domain.errors import AgentDisabled, CredentialInvalid
from agentbus.store.integration_tokens import VerifiedToken, verify_integration_token

__all__ = [
    "AUDIT_SCOPES",
    "AgentPrincipal",
    "Reader",
    "authenticate_agent",
    "authenticate_either",
    "authenticate_reader",
    "authenticate_token",
    "bearer_of",
    "client_ip",
    "principal_from_credential",
    "require_agent",
    "require_agent_scope",
    "require_scopes",
    "require_tenant_wide",
    "require_token",
]


AUDIT_SCOPES = ("read_audit", "admin")
Reader = AgentPrincipal | VerifiedToken
"""Who reads a message: one of its parties, or an operator's token (``authenticate_reader``)."""


def bearer_of(conn: HTTPConnection) -> str:
    """The Bearer value of ``Authorization``; AB-1001 when absent or malformed."""
    header = conn.headers.get("authorization", "")
    scheme, _, value = header.partition(" ")
    if scheme.lower() != "bearer" or not value.strip() or " " in value.strip():
        raise Unauthenticated("send Authorization: Bearer <token>")
    return value.strip()


def client_ip(conn: HTTPConnection) -> str | None:
    return conn.client.host if conn.client else None


async def authenticate_token(
    gw: Gateway,
    conn: HTTPConnection,
    scope: str | None = None,
    *,
    limit: Kind | None = Kind.MANAGEMENT,
) -> VerifiedToken:
    token = await verify_integration_token(gw.pool, bearer_of(conn), ip=client_ip(conn))
    if scope is not None and scope not in token.scopes:
        raise InsufficientScope(f"the token lacks the {scope!r} scope", scope=scope)
    if limit is not None:
        note_quota(conn, gw.request_limits.take(limit, token.token_id))
    return token


def require_scopes(
    token: VerifiedToken, scopes: tuple[str, ...], what: str = "this route"
) -> VerifiedToken:
    """AB-1007 unless the token holds one of ``scopes`` (the first is the one named)."""
    if not token.scopes.intersection(scopes):
        wanted = " or ".join(repr(scope) for scope in scopes)
        raise InsufficientScope(f"{what} takes a token with {wanted}", scope=scopes[0])
    return token


def require_tenant_wide(token: VerifiedToken, scopes: tuple[str, ...], what: str) -> None:
    """``require_scopes``, and a token not bound to a workspace (AB-1015), for routes over
    rows that name no workspace."""
    require_scopes(token, scopes, what)
    if token.workspace_id is not None:
        raise WorkspaceMismatch(f"{what} is tenant-wide; use a token not bound to a workspace")


async def authenticate_either(gw: Gateway, conn: HTTPConnection) -> Reader:
    """An integration token (of any scope), or an agent credential."""
    if bearer_of(conn).startswith("ab_"):
        return await authenticate_token(gw, conn)
    return await authenticate_agent(gw, conn)


async def authenticate_reader(gw: Gateway, conn: HTTPConnection) -> Reader:
    """An operator's integration token, or an agent credential (a party, judged per
    message)."""
    who = await authenticate_either(gw, conn)
    return require_scopes(who, AUDIT_SCOPES) if isinstance(who, VerifiedToken) else who


async def principal_from_credential(gw: Gateway, token: str) -> AgentPrincipal:
    """Verify an agent JWT and the agent's current state (no scope check)."""
    if token.startswith("ab_"):
        raise CredentialInvalid("this route takes an agent credential, not an integration token")
    try:
        claims = credentials.decode(gw.signing, token)
    except CredentialInvalid:
        # Another instance may have created a signing key since this one last looked.
        if gw.signing.public.get(credentials.kid_of(token)) is not None:
            raise
        await gw.signing.refresh(gw.pool)
        claims = credentials.decode(gw.signing, token)
    state = await gw.principals.state(claims.tenant_id, claims.agent_id, claims.token_id)
    if (
        state is None
        or state["deleted_at"] is not None
        or state["status"] in ("disabled", "deleted")
    ):
        raise AgentDisabled("the agent is disabled or deleted")
    if state["tenant_status"] != "active":
        raise TenantSuspended(tenant_status=state["tenant_status"])
    if state["token_id"] is None or state["token_revoked_at"] is not None:
        raise TokenRevoked("the integration token behind this credential was revoked")
    expires = state["token_expires_at"]
    if expires is not None and expires <= datetime.now(UTC):
        raise TokenExpired("the integration token behind this credential has expired")
    return AgentPrincipal(
        tenant_id=claims.tenant_id,
        workspace_id=state["workspace_id"],
        agent_id=claims.agent_id,
        key_id=claims.key_id,
        token_id=claims.token_id,
        scopes=claims.scopes,
        address=state["address"],
        owner_user_id=state["owner_user_id"],
        visibility=state["visibility"],
        credential_expires_at=claims.expires_at,
    )


async def authenticate_agent(
    gw: Gateway,
    conn: HTTPConnection,
    scope: str | None = None,
    *,
    limit: Kind | None = Kind.AGENT,
) -> AgentPrincipal:
    principal = await principal_from_credential(gw, bearer_of(conn))
    if scope is not None:
        require_agent_scope(principal, scope)
    if limit is not None:
        note_quota(conn, gw.request_limits.take(limit, principal.agent_id))
    return principal


def require_agent_scope(principal: AgentPrincipal, scope: str) -> AgentPrincipal:
    """AB-1007 unless the credential carries ``scope``."""
    if scope not in principal.scopes:
        raise InsufficientScope(f"the credential lacks the {scope!r} scope", scope=scope)
    return principal


def require_agent(
    scope: str | None = None,
) -> Callable[[HTTPConnection], Awaitable[AgentPrincipal]]:
    """FastAPI dependency: ``Annotated[AgentPrincipal, Depends(require_agent("receive"))]``."""

    async def dependency(conn: HTTPConnection) -> AgentPrincipal:
        return await authenticate_agent(get_gateway(conn), conn, scope)

    return dependency


def require_token(
    scope: str | None = None, *, limit: Kind | None = Kind.MANAGEMENT
) -> Callable[[HTTPConnection], Awaitable[VerifiedToken]]:
    async def dependency(conn: HTTPConnection) -> VerifiedToken:
        return await authenticate_token(get_gateway(conn), conn, scope, limit=limit)

    return dependency
