"""What a change set still needs before it may merge: each approval requirement, who has met
it, who could still meet it and how many approvals are missing (``cs show`` and
``GET /change-sets/{ref}/approvals``). Computed live from the current reviews, memberships and
bindings, by the same rules as merge (``reviews.requirements``)."""

from __future__ import annotations

from dataclasses import dataclass
from uuid import UUID

from strataplane.actions.access import tenant_tx
from strataplane.actions.change_sets import Ref, changes_of, load
from strataplane.actions.context import Ctx
from strataplane.actions.reviews import eligible_reviewers, requirements
from strataplane.store import change_sets as store
from strataplane.store import members
from strataplane.store import reviews as store_reviews
from strataplane.store.change_sets import ChangeSet

__all__ = ["ApprovalStatus", "Requirement", "approval_status"]

_PAGE = 500


@dataclass(frozen=True)
class Requirement:
    """One requirement: ``teams`` empty for the minimum number of approvals, one team, or the
    alternatives of a mode ``any`` rule."""

    teams: list[str]
    count: int
    rules: list[str]
    approved_by: list[str]
    missing: int
    can_satisfy: list[str]
    met: bool


@dataclass(frozen=True)
class ApprovalStatus:
    change_set: ChangeSet
    requirements: list[Requirement]
    rejected_by: list[str]
    approved: bool


async def approval_status(ctx: Ctx, ref: Ref) -> ApprovalStatus:
    async with tenant_tx(ctx) as tx:
        tx.require("spec.read")
        cs = await load(tx, ref)
        rows = await store.overlay(tx.conn, tx.tenant_id, cs.id)
        changes = await changes_of(tx, cs.base_revision_id, rows)
        met = await requirements(tx, cs, changes)
        people: dict[UUID, str] = {}
        after: UUID | None = None
        while True:
            page = await members.list_members(tx.conn, tx.tenant_id, after=after, limit=_PAGE)
            people.update((m.user_id, m.display_name) for m in page)
            if len(page) < _PAGE:
                break
            after = page[-1].user_id
        others = [u for u in people if u != cs.author_id]
        eligible = {UUID(u) for u in await eligible_reviewers(tx, others, changes.target)}
        teams = await store_reviews.team_members(tx.conn, tx.tenant_id)

    def names(ids: list[str] | tuple[str, ...]) -> list[str]:
        return sorted(people.get(UUID(i), i) for i in ids)

    def candidates(team_slugs: tuple[str, ...] | None, done: tuple[str, ...]) -> list[str]:
        pool = (
            eligible
            if team_slugs is None
            else eligible & set().union(*(teams.get(t, set()) for t in team_slugs))
        )
        return sorted(people[u] for u in pool if str(u) not in done)

    found = [
        Requirement(
            [],
            met.minimum,
            [],
            names(met.minimum_approvals),
            max(0, met.minimum - len(met.minimum_approvals)),
            candidates(None, met.minimum_approvals),
            met.minimum_met,
        )
    ]
    for t in met.teams:
        per_team = [
            len([a for a in t.approvals if UUID(a) in teams.get(s, set())]) for s in t.teams
        ]
        missing = 0 if t.met else t.count - max(per_team, default=0)
        found.append(
            Requirement(
                list(t.teams),
                t.count,
                list(t.rules),
                names(t.approvals),
                missing,
                candidates(t.teams, t.approvals),
                t.met,
            )
        )
    return ApprovalStatus(cs, found, names(met.rejected_by), met.approved)
