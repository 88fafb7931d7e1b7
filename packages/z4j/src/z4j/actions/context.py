"""Who is acting: the brain, the signed-in user (if any) and their session."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from z4j.actions.errors import AuthRequired
from z4j.brain import Brain


@dataclass(frozen=True)
class User:
    id: uuid.UUID
    email: str
    display_name: str | None
    is_admin: bool

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> User:
        return cls(row["id"], row["email"], row["display_name"], bool(row["is_admin"]))

    @property
    def label(self) -> str:
        return self.display_name or self.email


@dataclass(frozen=True)
class KeyGrant:
    """What an API key allows: one project, with at most ``role``. The acting ``User`` of a
    key never has ``is_admin`` (keys hold no brain-wide powers); ``owner_is_admin`` is what
    the owner's role in the project is computed from."""

    id: uuid.UUID
    project_id: uuid.UUID
    role: str
    owner_is_admin: bool


@dataclass(frozen=True)
class Ctx:
    brain: Brain
    user: User | None = None
    session_id: uuid.UUID | None = None
    key: KeyGrant | None = None

    @property
    def actor(self) -> User:
        """The signed-in user, or AuthRequired."""
        if self.user is None:
            raise AuthRequired()
        return self.user

    @property
    def actor_id(self) -> uuid.UUID | None:
        return self.user.id if self.user is not None else None
