"""The rules of who may change whom in a project (pure, property-tested)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st
from z4j.domain.membership import (
    INVITATION_VALID_FOR,
    InvitationState,
    RefusalKind,
    invitation_state,
    removal_refusal,
    role_change_refusal,
)
from z4j.domain.roles import Permission, Role, allows, can_grant

roles = st.sampled_from(list(Role))
actors = st.one_of(st.none(), roles)
owner_counts = st.integers(min_value=1, max_value=5)


@given(actors, roles, roles, owner_counts)
def test_a_role_change_never_leaves_a_project_without_an_owner(
    actor: Role | None, current: Role, new: Role, owners: int
) -> None:
    if role_change_refusal(actor, current, new, owners) is None:
        remaining = owners - (current is Role.OWNER) + (new is Role.OWNER)
        assert remaining >= 1


@given(actors, roles, roles, owner_counts)
def test_an_allowed_change_stays_within_the_actors_reach(
    actor: Role | None, current: Role, new: Role, owners: int
) -> None:
    if role_change_refusal(actor, current, new, owners) is None:
        assert actor is not None
        assert can_grant(actor, new)
        assert actor.at_least(current)
        assert allows(actor, Permission.MEMBER_MANAGE)


@given(actors, roles, owner_counts, st.booleans())
def test_a_removal_never_takes_the_last_owner(
    actor: Role | None, member: Role, owners: int, is_self: bool
) -> None:
    refusal = removal_refusal(actor, member, owners, is_self=is_self)
    if member is Role.OWNER and owners == 1:
        assert refusal is not None
        if is_self or actor is Role.OWNER:
            assert refusal.kind is RefusalKind.LAST_OWNER


@given(roles, roles, owner_counts)
def test_anyone_may_leave_unless_last_owner(actor: Role, member: Role, owners: int) -> None:
    refusal = removal_refusal(actor, member, owners, is_self=True)
    assert (refusal is None) == (member is not Role.OWNER or owners > 1)


def test_the_table_of_examples() -> None:
    assert role_change_refusal(Role.ADMIN, Role.OPERATOR, Role.VIEWER, 1) is None
    assert role_change_refusal(Role.ADMIN, Role.OWNER, Role.ADMIN, 2) is not None
    assert role_change_refusal(Role.OWNER, Role.OWNER, Role.ADMIN, 2) is None
    last = role_change_refusal(Role.OWNER, Role.OWNER, Role.ADMIN, 1)
    assert last is not None
    assert last.kind is RefusalKind.LAST_OWNER
    assert role_change_refusal(Role.OPERATOR, Role.VIEWER, Role.OPERATOR, 1) is not None
    assert removal_refusal(Role.VIEWER, Role.OPERATOR, 1, is_self=False) is not None


@given(st.integers(min_value=-(10**6), max_value=10**6), st.booleans())
def test_an_invitation_is_pending_until_accepted_or_past_72_hours(
    offset_seconds: int, accepted: bool
) -> None:
    created = datetime(2026, 1, 1, tzinfo=UTC)
    expires = created + INVITATION_VALID_FOR
    now = expires + timedelta(seconds=offset_seconds)
    state = invitation_state(expires, created if accepted else None, now)
    if accepted:
        assert state is InvitationState.ACCEPTED
    else:
        assert state is (InvitationState.PENDING if now < expires else InvitationState.EXPIRED)
