"""Changing who is in a project: invitations, role changes and removals.

People join a project only by accepting an invitation sent to their email (a brain
administrator, who manages accounts anyway, may still add an existing user directly). A
project always keeps an owner: the last one can be neither demoted nor removed, by anyone,
themselves included.

Pure: no I/O. The actions ask these functions and raise what they answer.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum

from z4j.domain.roles import Permission, Role, allows, can_grant

INVITATION_VALID_FOR = timedelta(hours=72)


class InvitationState(StrEnum):
    PENDING = "pending"
    ACCEPTED = "accepted"
    EXPIRED = "expired"


def invitation_state(
    expires_at: datetime, accepted_at: datetime | None, now: datetime
) -> InvitationState:
    if accepted_at is not None:
        return InvitationState.ACCEPTED
    return InvitationState.PENDING if now < expires_at else InvitationState.EXPIRED


class RefusalKind(StrEnum):
    PERMISSION = "permission"  # the actor's role does not reach
    LAST_OWNER = "last_owner"  # the project would be left without an owner


@dataclass(frozen=True)
class Refusal:
    kind: RefusalKind
    sentence: str


def _a(role: Role) -> str:
    return f"an {role}" if role.value[0] in "aeiou" else f"a {role}"


def _manages(actor: Role | None, member: Role) -> bool:
    """Whether ``actor`` may act on a member who holds ``member``: managers act on roles up to
    their own, and only owners on owners."""
    if actor is None or not allows(actor, Permission.MEMBER_MANAGE):
        return False
    if member is Role.OWNER:
        return allows(actor, Permission.PROJECT_MANAGE)
    return actor.at_least(member)


def role_change_refusal(
    actor: Role | None, current: Role, new: Role, owners: int
) -> Refusal | None:
    """Why ``actor`` may not move a member from ``current`` to ``new``, or None.

    ``owners`` is the project's number of owners, the member counted."""
    if not _manages(actor, current) or not can_grant(actor, new):
        return Refusal(
            RefusalKind.PERMISSION, f"The {actor} role cannot make {_a(current)} {_a(new)}."
        )
    if current is Role.OWNER and new is not Role.OWNER and owners <= 1:
        return Refusal(RefusalKind.LAST_OWNER, "The project's last owner cannot be demoted.")
    return None


def removal_refusal(
    actor: Role | None, member: Role, owners: int, *, is_self: bool
) -> Refusal | None:
    """Why ``actor`` may not remove a member holding ``member`` (themselves when ``is_self``:
    anyone may leave), or None."""
    if not is_self and not _manages(actor, member):
        return Refusal(RefusalKind.PERMISSION, f"The {actor} role cannot remove {_a(member)}.")
    if member is Role.OWNER and owners <= 1:
        return Refusal(RefusalKind.LAST_OWNER, "The project's last owner cannot be removed.")
    return None
