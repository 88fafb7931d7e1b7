"""The permission matrix and scope rules of docs/strataplane/architecture.md §5.2 and §5.3,
table-driven against the pure ``authz.decide``."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from strataplane import authz
from strataplane.authz import Binding, FileChange, Host, Target, decide

# The matrix as the design document draws it (x = the role grants the permission).
MATRIX_DOC = """
permission               viewer author approver operator secret-admin admin
spec.read                  x      x      x        x         x          x
inventory.read             x      x      x        x         x          x
change_set.comment         x      x      x        x         x          x
change_set.author          .      x      .        .         .          x
change_set.merge           .      x      .        .         .          x
change_set.review          .      .      x        .         .          x
change_set.close_any       .      .      .        .         .          x
rollout.pause              .      .      .        x         .          x
rollout.manage             .      .      .        x         .          x
pin.manage                 .      .      .        x         .          x
agent.manage               .      .      .        x         .          x
enrollment_token.manage    .      .      .        x         .          x
journey.run                .      .      .        x         .          x
journey.explore            .      x      .        .         .          x
secret.write               .      .      .        .         x          x
secret.delivery.read       .      .      .        .         x          x
audit.read                 .      .      .        .         .          x
tenant.admin               .      .      .        .         .          x
"""
_ROWS = [line.split() for line in MATRIX_DOC.strip().splitlines()]
ROLES = _ROWS[0][1:]
EXPECTED = {row[0]: dict(zip(ROLES, (c == "x" for c in row[1:]), strict=True)) for row in _ROWS[1:]}

T, U = uuid.uuid4(), uuid.uuid4()
LINUX = Host(T, {"os": "linux", "zone": "dmz"})
WINDOWS = Host(U, {"os": "windows"})
# A target inside every narrow scope used below, so only the role decides.
EVERYTHING = Target(
    hosts=(LINUX,), files=(FileChange("Layer", T, T),), impacted=(LINUX,), secret_owner=T
)


def _b(role: str, kind: str = "tenant", team: uuid.UUID | None = None, sel: Any = None) -> Binding:
    return Binding(uuid.uuid4(), role, kind, team, sel)


def test_matrix_lists_every_permission_and_role() -> None:
    assert set(EXPECTED) == set(authz.PERMISSIONS)
    assert tuple(ROLES) == authz.ROLES


@pytest.mark.parametrize("permission", sorted(EXPECTED))
@pytest.mark.parametrize("role", ROLES)
def test_role_grants_with_tenant_scope(permission: str, role: str) -> None:
    binding = _b(role)
    decision = decide([binding], permission, EVERYTHING)
    assert decision.allowed is EXPECTED[permission][role]
    assert decision.bindings == ((binding.id,) if decision.allowed else ())


@pytest.mark.parametrize("permission", sorted(EXPECTED))
def test_no_binding_no_permission(permission: str) -> None:
    assert not decide([], permission, EVERYTHING).allowed


OWNER_T = ("owner", T, None)
OWNER_U = ("owner", U, None)
LINUX_SEL = ("selector", None, {"matchLabels": {"os": "linux"}})

# (permission, role, scope, target, allowed): the scope rules, one line each.
SCOPE_CASES = [
    ("spec.read", "viewer", OWNER_U, EVERYTHING, True),  # any binding gives the whole spec
    ("change_set.comment", "viewer", LINUX_SEL, Target(), True),
    ("rollout.pause", "operator", OWNER_U, Target(), True),
    ("journey.explore", "author", LINUX_SEL, Target(), True),
    ("inventory.read", "viewer", OWNER_T, Target(hosts=(LINUX,)), True),
    ("inventory.read", "viewer", OWNER_T, Target(hosts=(WINDOWS,)), False),
    ("inventory.read", "viewer", LINUX_SEL, Target(hosts=(LINUX,)), True),
    ("inventory.read", "viewer", LINUX_SEL, Target(hosts=(WINDOWS,)), False),
    ("agent.manage", "operator", OWNER_T, Target(hosts=(LINUX,)), True),
    ("journey.run", "operator", LINUX_SEL, Target(hosts=(WINDOWS,)), False),
    ("pin.manage", "operator", LINUX_SEL, Target(hosts=(LINUX,)), True),  # agent pin
    ("pin.manage", "operator", LINUX_SEL, authz.TENANT, False),  # selector pin
    ("rollout.manage", "operator", OWNER_T, Target(hosts=(LINUX,)), False),  # tenant only
    ("enrollment_token.manage", "operator", LINUX_SEL, Target(), False),
    ("audit.read", "admin", OWNER_T, EVERYTHING, False),
    ("tenant.admin", "admin", OWNER_T, EVERYTHING, False),
    ("change_set.close_any", "admin", OWNER_T, EVERYTHING, False),
    ("secret.write", "secret-admin", OWNER_T, Target(secret_owner=T), True),
    ("secret.write", "secret-admin", OWNER_T, Target(secret_owner=U), False),
    ("secret.delivery.read", "secret-admin", LINUX_SEL, Target(secret_owner=T), False),
    ("change_set.author", "author", OWNER_T, Target(files=(FileChange("Layer", T, T),)), True),
    ("change_set.author", "author", OWNER_T, Target(files=(FileChange("Layer", None, T),)), True),
    ("change_set.author", "author", OWNER_T, Target(files=(FileChange("Layer", T, U),)), False),
    ("change_set.merge", "author", OWNER_U, Target(files=(FileChange("Bundle", T, T),)), False),
    ("change_set.author", "author", OWNER_T, Target(), True),  # an empty change set
    (
        "change_set.author",
        "author",
        LINUX_SEL,
        Target(files=(FileChange("Layer", T, T),), impacted=(LINUX,)),
        True,
    ),
    (
        "change_set.author",
        "author",
        LINUX_SEL,
        Target(files=(FileChange("Layer", T, T),), impacted=(LINUX, WINDOWS)),
        False,
    ),
    (
        "change_set.author",
        "author",
        LINUX_SEL,
        Target(files=(FileChange("Settings", T, T),), impacted=(LINUX,)),
        False,  # selector scope never covers policy or settings files (SP-6003)
    ),
    ("change_set.review", "approver", OWNER_T, Target(files=(FileChange("Layer", U, T),)), True),
    ("change_set.review", "approver", OWNER_T, Target(files=(FileChange("Layer", U, U),)), False),
    ("change_set.review", "approver", LINUX_SEL, Target(impacted=(WINDOWS, LINUX)), True),
    ("change_set.review", "approver", LINUX_SEL, Target(impacted=(WINDOWS,)), False),
]


@pytest.mark.parametrize(("permission", "role", "scope", "target", "allowed"), SCOPE_CASES)
def test_scope_rules(
    permission: str,
    role: str,
    scope: tuple[Any, ...],
    target: Target,
    allowed: bool,
) -> None:
    assert decide([_b(role, *scope)], permission, target).allowed is allowed


def test_a_move_between_teams_needs_both_owners() -> None:
    move = Target(files=(FileChange("Layer", T, U),))
    t, u = _b("author", *OWNER_T), _b("author", *OWNER_U)
    assert not decide([t], "change_set.author", move).allowed
    decision = decide([t, u], "change_set.author", move)
    assert decision.allowed
    assert set(decision.bindings) == {t.id, u.id}


def test_token_allowlist_keeps_only_its_roles() -> None:
    author, approver = _b("author"), _b("approver")
    bindings = [author, approver]
    ci = frozenset({"author"})
    assert decide(bindings, "change_set.merge", EVERYTHING, token_roles=ci).allowed
    assert not decide(bindings, "change_set.review", EVERYTHING, token_roles=ci).allowed
    assert decide(bindings, "change_set.review", EVERYTHING).bindings == (approver.id,)


def test_decision_names_every_binding_that_allowed_it() -> None:
    admin, viewer, stranger = _b("admin"), _b("viewer", *OWNER_T), _b("operator")
    decision = decide([admin, viewer, stranger], "spec.read")
    assert set(decision.bindings) == {admin.id, viewer.id, stranger.id}
    assert decide([admin, viewer], "tenant.admin").bindings == (admin.id,)


def test_selector_matching_follows_the_spec_semantics() -> None:
    labels = {"os": "linux", "zone": "dmz"}
    match = authz.match_selector
    assert match({}, labels)
    assert match(
        {"matchExpressions": [{"key": "env", "operator": "NotIn", "values": ["a"]}]}, labels
    )
    assert not match({"matchExpressions": [{"key": "zone", "operator": "DoesNotExist"}]}, labels)
    assert match(
        {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["dmz"]}]}, labels
    )
    assert not match({"matchLabels": {"os": 1}}, labels)  # invalid: matches nothing
