"""Who is acting and with what: the services, the principal and the request's origin."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from uuid import UUID

from platformkit.db.scope import Pool
from platformkit.jobs import JobRunner
from platformkit.passwords import DEFAULT_POLICY, PasswordPolicy
from platformkit.signin import SignInThrottle

from strataplane.settings import Settings

SIGN_IN_TABLE = "strataplane.sign_in_throttle"


@dataclass
class Services:
    """What actions need from the running server; one per process."""

    pool: Pool
    settings: Settings
    jobs: JobRunner | None = None
    password_policy: PasswordPolicy = field(default=DEFAULT_POLICY)
    sign_in: SignInThrottle = field(default_factory=lambda: SignInThrottle(SIGN_IN_TABLE))


@dataclass(frozen=True)
class Principal:
    """An authenticated user or service account and the credential it used.

    ``tenant_id`` is the tenant the credential is bound to; None for a platform token, a
    platform session, or a session that has not chosen a tenant yet (``bound`` False).
    """

    user_id: UUID
    kind: str
    display_name: str
    platform_admin: bool
    tenant_id: UUID | None
    bound: bool = True
    token_id: UUID | None = None
    token_roles: frozenset[str] | None = None
    session_id: str | None = None

    @property
    def platform(self) -> bool:
        """A platform credential: a platform token or a session bound to the platform."""
        return self.bound and self.tenant_id is None


@dataclass(frozen=True)
class Ctx:
    """An action's context. ``principal`` None is the system itself (CLI, jobs)."""

    services: Services
    principal: Principal | None
    tenant_id: UUID | None = None
    request_id: str | None = None
    source_ip: str | None = None

    @property
    def pool(self) -> Pool:
        return self.services.pool

    @property
    def user_id(self) -> UUID | None:
        return self.principal.user_id if self.principal is not None else None

    @property
    def actor(self) -> tuple[str, str | None]:
        """audit actor_kind and actor_id."""
        if self.principal is None:
            return "system", None
        return "user", str(self.principal.user_id)

    def in_tenant(self, tenant_id: UUID) -> Ctx:
        return replace(self, tenant_id=tenant_id)


def system_ctx(services: Services, tenant_id: UUID | None = None) -> Ctx:
    return Ctx(services, None, tenant_id)


def user_ctx(
    services: Services,
    principal: Principal,
    *,
    request_id: str | None = None,
    source_ip: str | None = None,
) -> Ctx:
    return Ctx(services, principal, principal.tenant_id, request_id, source_ip)
