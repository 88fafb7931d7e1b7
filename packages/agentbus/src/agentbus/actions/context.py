"""Who is acting, and with what: passed as ``ctx`` to every action."""

from __future__ import annotations

import getpass
import uuid
from dataclasses import dataclass
from typing import Literal

from platformkit.crypto import Keyring
from platformkit.db.scope import Pool

from agentbus.ids import format_id

ActorType = Literal["user", "support", "platform", "system"]


@dataclass(frozen=True)
class Actor:
    """``audit_actions.actor_type`` / ``actor_id``; a user also carries its tenant and uuid."""

    type: ActorType
    id: str
    user_id: uuid.UUID | None = None
    tenant_id: uuid.UUID | None = None

    @classmethod
    def user(cls, tenant_id: uuid.UUID, user_id: uuid.UUID) -> Actor:
        return cls("user", format_id("usr", user_id), user_id, tenant_id)

    @classmethod
    def operator(cls, name: str | None = None) -> Actor:
        """A platform operator: the admin CLI (named after the login running it) or the
        operator token of the API."""
        return cls("platform", name or f"cli:{getpass.getuser()}")

    @classmethod
    def system(cls, name: str) -> Actor:
        return cls("system", name)


@dataclass(frozen=True)
class Ctx:
    pool: Pool
    actor: Actor
    keyring: Keyring | None = None
    ip: str | None = None
    user_agent: str | None = None
