"""Who may do what: roles, the permission matrix and scope rules, as a pure function.

``decide(bindings, permission, target)`` answers whether some effective role binding grants
``permission`` with a scope that reaches ``target`` (docs/strataplane/architecture.md §5.2 to
§5.4), and which bindings did. No I/O: the caller loads the bindings (the user's own plus those
of their teams) and describes the target; list reads filter by scope in SQL instead.

Coverage of a change (rule COVER) may combine bindings: a file moved from team T to team U is
covered by an owner binding on T together with one on U. Every other rule needs one binding.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any
from uuid import UUID

from strataplane.domain.spec.diagnostics import SpecError
from strataplane.domain.spec.selectors import selector_from_json

__all__ = [
    "AUTHZ_PACKAGE",
    "MATRIX",
    "PERMISSIONS",
    "ROLES",
    "TENANT",
    "Binding",
    "Decision",
    "FileChange",
    "Host",
    "Rule",
    "Target",
    "decide",
    "match_selector",
]

# Recorded in every audit event's details.authz; bump when the matrix or a scope rule changes.
AUTHZ_PACKAGE = "2025.1"
ROLES = ("viewer", "author", "approver", "operator", "secret-admin", "admin")
SCOPE_KINDS = ("tenant", "owner", "selector")
POLICY_KINDS = frozenset({"ApprovalPolicy", "RolloutPolicy", "Settings", "Placement"})


class Rule(StrEnum):
    ANY = "any binding"
    TENANT = "tenant scope"
    HOST = "the host in scope"
    COVER = "must cover the change"
    INTERSECT = "must intersect the change"
    SECRET_OWNER = "the Secret's owner in scope, never selector"  # noqa: S105 - not a secret


_ALL = frozenset(ROLES)


def _roles(*names: str) -> frozenset[str]:
    return frozenset((*names, "admin"))


MATRIX: dict[str, tuple[frozenset[str], Rule]] = {
    "spec.read": (_ALL, Rule.ANY),
    "inventory.read": (_ALL, Rule.HOST),
    "change_set.comment": (_ALL, Rule.ANY),
    "change_set.author": (_roles("author"), Rule.COVER),
    "change_set.merge": (_roles("author"), Rule.COVER),
    "change_set.review": (_roles("approver"), Rule.INTERSECT),
    "change_set.close_any": (_roles(), Rule.TENANT),
    "rollout.pause": (_roles("operator"), Rule.ANY),
    "rollout.manage": (_roles("operator"), Rule.TENANT),
    "pin.manage": (_roles("operator"), Rule.HOST),
    "agent.manage": (_roles("operator"), Rule.HOST),
    "enrollment_token.manage": (_roles("operator"), Rule.TENANT),
    "journey.run": (_roles("operator"), Rule.HOST),
    "journey.explore": (_roles("author"), Rule.ANY),
    "secret.write": (_roles("secret-admin"), Rule.SECRET_OWNER),
    "secret.delivery.read": (_roles("secret-admin"), Rule.SECRET_OWNER),
    "audit.read": (_roles(), Rule.TENANT),
    "tenant.admin": (_roles(), Rule.TENANT),
}
PERMISSIONS = tuple(MATRIX)


@dataclass(frozen=True)
class Binding:
    id: UUID
    role: str
    scope_kind: str = "tenant"
    scope_team_id: UUID | None = None
    scope_selector: Mapping[str, Any] | None = None


@dataclass(frozen=True)
class Host:
    owner_team_id: UUID | None
    labels: Mapping[str, str]


@dataclass(frozen=True)
class FileChange:
    """One changed spec file: its kind and owning team before and after (None: absent)."""

    kind: str
    owner_before: UUID | None
    owner_after: UUID | None


@dataclass(frozen=True)
class Target:
    """What an action reaches. ``tenant_wide`` targets are reached by tenant scope only (a
    selector pin, a tenant setting); otherwise the fields the permission's rule reads."""

    tenant_wide: bool = False
    hosts: tuple[Host, ...] = ()
    files: tuple[FileChange, ...] = ()
    impacted: tuple[Host, ...] = ()
    secret_owner: UUID | None = None


TENANT = Target(tenant_wide=True)


@dataclass(frozen=True)
class Decision:
    permission: str
    allowed: bool
    bindings: tuple[UUID, ...] = ()


Matcher = Callable[[Mapping[str, Any], Mapping[str, str]], bool]


def match_selector(selector: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    """spec-format.md §2.3 on one host; a selector that does not parse matches nothing."""
    try:
        return selector_from_json(selector).matches(labels)
    except SpecError:
        return False


def _reaches_host(b: Binding, host: Host, matches: Matcher) -> bool:
    if b.scope_kind == "owner":
        return host.owner_team_id is not None and host.owner_team_id == b.scope_team_id
    return b.scope_kind == "selector" and matches(b.scope_selector or {}, host.labels)


def _owners(target: Target) -> set[UUID]:
    return {o for f in target.files for o in (f.owner_before, f.owner_after) if o is not None}


def _single(b: Binding, rule: Rule, target: Target, matches: Matcher) -> bool:
    """Whether binding ``b`` alone satisfies ``rule`` for ``target``."""
    if rule is Rule.ANY or b.scope_kind == "tenant":
        return True
    if rule is Rule.TENANT or target.tenant_wide:
        return False
    if rule is Rule.HOST:
        return bool(target.hosts) and all(_reaches_host(b, h, matches) for h in target.hosts)
    if rule is Rule.INTERSECT:
        if b.scope_kind == "owner":
            return b.scope_team_id in _owners(target)
        return any(_reaches_host(b, h, matches) for h in target.impacted)
    if rule is Rule.SECRET_OWNER:
        return b.scope_kind == "owner" and target.secret_owner == b.scope_team_id
    return False  # COVER by a narrower scope is decided over all bindings together


def _cover(grant: list[Binding], target: Target, matches: Matcher) -> tuple[UUID, ...]:
    if target.tenant_wide:
        return ()
    if not target.files and not target.impacted:  # nothing changed yet: any binding covers it
        return tuple(sorted(b.id for b in grant))
    owners = _owners(target)
    by_team = [b for b in grant if b.scope_kind == "owner"]
    if owners and owners <= {b.scope_team_id for b in by_team}:
        return tuple(sorted(b.id for b in by_team if b.scope_team_id in owners))
    selectors = [b for b in grant if b.scope_kind == "selector"]
    if not selectors or any(f.kind in POLICY_KINDS for f in target.files):
        return ()
    picked: set[UUID] = set()
    for host in target.impacted:
        hit = next((b for b in selectors if _reaches_host(b, host, matches)), None)
        if hit is None:
            return ()
        picked.add(hit.id)
    # An impact set with no agents is covered by any selector binding.
    return tuple(sorted(picked or {b.id for b in selectors}))


def decide(
    bindings: Iterable[Binding],
    permission: str,
    target: Target = TENANT,
    *,
    token_roles: frozenset[str] | None = None,
    matches: Matcher = match_selector,
) -> Decision:
    """Allow when the effective bindings grant ``permission`` with a scope reaching ``target``.

    ``token_roles`` is an API token's allowlist: only bindings of those roles count.
    """
    roles, rule = MATRIX[permission]
    grant = [
        b for b in bindings if b.role in roles and (token_roles is None or b.role in token_roles)
    ]
    single = tuple(sorted(b.id for b in grant if _single(b, rule, target, matches)))
    if single:
        return Decision(permission, True, single)
    if rule is Rule.COVER:
        combined = _cover(grant, target, matches)
        if combined:
            return Decision(permission, True, combined)
    return Decision(permission, False)
