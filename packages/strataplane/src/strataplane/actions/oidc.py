"""Sign-in through the OIDC provider of the installation (settings ``oidc_*``).

``begin_login`` keeps the login's nonce and PKCE verifier server-side (oidc_login) under the
digest of its state, and returns the provider's URL; ``complete_login`` takes that row back
by the state the browser returns, redeems the code, and with the ID token's claims:

- finds or creates the app_user of (issuer, sub), its name and email following the provider's;
- makes it a member (source oidc) of the configured tenant at its first login; a membership a
  tenant admin disabled stays disabled and refuses the login;
- syncs its oidc teams from the groups claim: member of exactly the teams whose external_id is
  one of its groups (docs/strataplane/sign-in.md);
- opens a session bound to that tenant, audited like a local login.
"""

from __future__ import annotations

import hashlib
import logging
from typing import Any

from platformkit.db.scope import platform_transaction, tenant_transaction, transaction
from platformkit.ids import uuid7
from platformkit.oidc import OidcClient, OidcError, Pending, new_pending

from strataplane import errors
from strataplane.actions.context import Ctx, Services
from strataplane.actions.sessions import NewSession, bind, resolve_tenant
from strataplane.db import SCOPE
from strataplane.store import audit, members, oidc_logins, platform_audit, teams, users

log = logging.getLogger(__name__)
LOGIN_LIFETIME = oidc_logins.LIFETIME

# What one login may bring: more groups, or longer names, are not team names.
MAX_GROUPS = 500
MAX_GROUP_LENGTH = 256
MAX_NAME_LENGTH = 200

_clients: dict[tuple[str, str, str | None, str], OidcClient] = {}


def client_of(services: Services) -> OidcClient:
    """The provider's client, one per configuration (it keeps discovery and keys)."""
    s = services.settings
    if not (s.oidc_issuer and s.oidc_client_id and s.oidc_tenant):
        raise errors.OidcNotConfigured()
    secret = s.oidc_client_secret.get_secret_value() if s.oidc_client_secret else None
    key = (s.oidc_issuer, s.oidc_client_id, secret, s.oidc_scopes)
    if key not in _clients:
        try:
            _clients[key] = OidcClient(*key[:3], scopes=s.oidc_scopes.split())
        except OidcError as exc:
            log.error("OIDC provider not usable: %s", exc)
            raise errors.OidcNotConfigured() from None
    return _clients[key]


def state_hash(state: str) -> str:
    return hashlib.sha256(state.encode()).hexdigest()


async def begin_login(services: Services, redirect_uri: str, next_path: str) -> tuple[str, str]:
    """The provider's authorization URL and the login's state (for the browser's cookie)."""
    client = client_of(services)
    pending = new_pending()
    try:
        url = await client.authorization_url(redirect_uri, pending)
    except OidcError as exc:
        log.warning("OIDC login could not start: %s", exc)
        raise errors.OidcFailed("the provider could not be reached") from None
    async with transaction(services.pool) as conn:
        await oidc_logins.insert_login(
            conn, state_hash(pending.state), pending.nonce, pending.code_verifier, next_path
        )
    return url, pending.state


def groups_of(claims: dict[str, Any], claim: str) -> list[str]:
    """The groups claim as a list of strings (one string counts as one group); anything else
    in it, and overlong values, are ignored."""
    value = claims.get(claim)
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list):
        return []
    kept = {g for g in value if isinstance(g, str) and 0 < len(g) <= MAX_GROUP_LENGTH}
    return sorted(kept)[:MAX_GROUPS]


def profile_of(claims: dict[str, Any]) -> tuple[str, str | None]:
    """Display name and email from the claims (an email the provider says is unverified is
    not kept)."""
    email = claims.get("email")
    if not isinstance(email, str) or claims.get("email_verified") is False:
        email = None
    for key in ("name", "preferred_username"):
        name = claims.get(key)
        if isinstance(name, str) and name.strip():
            return name.strip()[:MAX_NAME_LENGTH], email
    return (email or str(claims["sub"]))[:MAX_NAME_LENGTH], email


async def complete_login(
    services: Services, meta: Ctx, *, code: str, state: str, redirect_uri: str
) -> tuple[NewSession, str]:
    """The session of the person the provider vouched for, and where to send them next."""
    client = client_of(services)
    async with transaction(services.pool) as conn:
        pending = await oidc_logins.take_login(conn, state_hash(state))
    if pending is None:
        raise errors.OidcFailed("the sign-in expired or was already used; start again")
    try:
        claims = await client.claims(
            code, redirect_uri, Pending(state, pending.nonce, pending.code_verifier)
        )
    except OidcError as exc:
        log.warning("OIDC login refused: %s", exc)
        raise errors.OidcFailed() from None
    settings = services.settings
    tenant_id = await resolve_tenant(services, settings.oidc_tenant or "")
    name, email = profile_of(claims)
    async with transaction(services.pool) as conn:
        user, created = await users.upsert_external(
            conn, uuid7(), issuer=client.issuer, subject=claims["sub"], display_name=name,
            email=email,
        )  # fmt: skip
    if user.disabled_at is not None:
        raise errors.AuthRequired("this account is disabled")
    if created:
        async with platform_transaction(services.pool, SCOPE) as conn:
            await platform_audit.append(conn, platform_audit.PlatformEvent(
                "system", None, "user.create", "user", str(user.id), tenant_id=tenant_id,
                request_id=meta.request_id, source_ip=meta.source_ip,
                details={"issuer": client.issuer, "source": "oidc"},
            ))  # fmt: skip
    groups = groups_of(claims, settings.oidc_groups_claim)
    async with tenant_transaction(services.pool, SCOPE, tenant_id) as conn:
        events: list[tuple[str, str, str, dict[str, Any]]] = []
        member = await members.get_member(conn, tenant_id, user.id)
        if member is None:
            await members.insert_member(conn, tenant_id, user.id, "oidc")
            events.append(("member.create", "user", str(user.id), {"source": "oidc"}))
        elif not member.active:
            raise errors.MembershipDisabled()
        joined, left = await teams.sync_oidc_teams(conn, tenant_id, user.id, groups)
        if joined or left:
            details: dict[str, Any] = {"joined": joined, "left": left}
            events.append(("team_member.sync", "user", str(user.id), details))
        for action, kind, object_id, detail in events:
            await audit.append(conn, tenant_id, audit.Event(
                "user", str(user.id), action, kind, object_id,
                request_id=meta.request_id, source_ip=meta.source_ip, details=detail,
            ))  # fmt: skip
    session = await bind(services, user, tenant_id, False, meta)
    return session, pending.next_path
