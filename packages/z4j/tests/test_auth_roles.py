"""The permission matrix, and the properties the role order must keep."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from z4j.domain.roles import (
    BRAIN_ADMIN_ROLE,
    MINIMUM_ROLE,
    Permission,
    Role,
    allows,
    can_create_project,
    can_grant,
    effective_role,
)

P = Permission
# The documented matrix, written out: who may do what.
OPERATE = {P.PROJECT_READ, P.TASK_RETRY, P.TASK_CANCEL, P.QUEUE_MANAGE, P.WORKER_MANAGE,
           P.SCHEDULE_MANAGE}  # fmt: skip
MATRIX = {
    Role.VIEWER: {P.PROJECT_READ},
    Role.OPERATOR: OPERATE,
    Role.ADMIN: OPERATE
    | {P.AGENT_MANAGE, P.MEMBER_MANAGE, P.AUDIT_READ, P.RETENTION_MANAGE, P.ALERT_MANAGE},
    Role.OWNER: set(Permission),
}

roles = st.sampled_from(list(Role))
maybe_roles = st.one_of(st.none(), roles)
permissions = st.sampled_from(list(Permission))


@pytest.mark.parametrize("role", list(Role))
@pytest.mark.parametrize("permission", list(Permission))
def test_matrix(role: Role, permission: Permission) -> None:
    assert allows(role, permission) is (permission in MATRIX[role])


def test_every_permission_has_a_minimum_role() -> None:
    assert set(MINIMUM_ROLE) == set(Permission)


@given(permissions)
def test_no_role_no_permission(permission: Permission) -> None:
    assert not allows(None, permission)


@given(roles, roles, permissions)
def test_a_higher_role_holds_everything_a_lower_one_does(
    a: Role, b: Role, permission: Permission
) -> None:
    if a.at_least(b) and allows(b, permission):
        assert allows(a, permission)


@given(maybe_roles, st.booleans())
def test_brain_admins_see_every_project_and_keep_a_higher_membership(
    membership: Role | None, is_admin: bool
) -> None:
    role = effective_role(membership, is_admin)
    if not is_admin:
        assert role is membership
    else:
        assert role is not None
        assert role.at_least(BRAIN_ADMIN_ROLE)
        if membership is not None:
            assert role.at_least(membership)


@given(maybe_roles, roles)
def test_grants_never_exceed_the_granter(actor: Role | None, granted: Role) -> None:
    if can_grant(actor, granted):
        assert actor is not None
        assert actor.at_least(granted)
        assert allows(actor, Permission.MEMBER_MANAGE)


def test_only_owners_make_owners() -> None:
    assert can_grant(Role.OWNER, Role.OWNER)
    assert not can_grant(Role.ADMIN, Role.OWNER)
    assert can_grant(Role.ADMIN, Role.ADMIN)
    assert not can_grant(Role.OPERATOR, Role.VIEWER)


def test_only_brain_admins_create_projects() -> None:
    assert can_create_project(True)
    assert not can_create_project(False)
