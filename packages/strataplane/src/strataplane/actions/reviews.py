"""Submit, reviews and approval requirements (docs/strataplane/architecture.md §3.5).

Requirements come from the ApprovalPolicy objects and Settings of the base revision, evaluated
by ``domain.approvals.evaluate`` against each reviewer's latest review at the current digest.
An approval counts when its reviewer is not the author, is an active member holding
``change_set.review`` with a scope that intersects the change set, and, for a team, is in the
team and named it in ``acting_teams``. They are recomputed and stored on submit, after every
review, on every edit and rebase, and by merge.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Literal
from uuid import UUID

from platformkit.ids import uuid7

from strataplane import authz, errors
from strataplane.actions.access import TenantTx, tenant_tx
from strataplane.actions.change_sets import (
    OPEN,
    Changes,
    Empty,
    NotValidated,
    Ref,
    changes_of,
    load,
    require_author,
    require_cover,
    require_digest,
    require_state,
)
from strataplane.actions.context import Ctx
from strataplane.domain import approvals
from strataplane.domain.spec.canonical import parse
from strataplane.domain.spec.paths import SETTINGS_PATH, ObjectId, parse_path
from strataplane.store import bindings, fleet_artifacts, members, objects
from strataplane.store import change_sets as store
from strataplane.store import reviews as store_reviews
from strataplane.store.change_sets import NOW, ChangeSet
from strataplane.store.reviews import Review

type Decision = Literal["approve", "reject", "comment"]
_DECISIONS: dict[str, Decision] = {"approve": "approve", "reject": "reject", "comment": "comment"}


class SelfApproval(errors.StrataplaneError):
    code, status, title = "review.self_approval", 403, "The author cannot approve their change"


class HumanOnly(errors.StrataplaneError):
    code, status, title = "review.human_only", 403, "Reviews are made by people"


async def eligible_reviewers(
    tx: TenantTx, reviewers: Iterable[UUID], target: authz.Target
) -> set[str]:
    """Reviewers who may approve now: active human members whose bindings intersect."""
    found = set()
    for user_id in reviewers:
        member = await members.get_member(tx.conn, tx.tenant_id, user_id)
        if member is None or not member.active or member.kind != "human":
            continue
        rows = await bindings.effective_bindings(tx.conn, tx.tenant_id, user_id, with_teams=True)
        held = [
            authz.Binding(r.id, r.role, r.scope_kind, r.scope_team_id, r.scope_selector)
            for r in rows
        ]
        if authz.decide(held, "change_set.review", target).allowed:
            found.add(str(user_id))
    return found


async def requirements(tx: TenantTx, cs: ChangeSet, changes: Changes) -> approvals.Requirements:
    base = await objects.contents_at(
        tx.conn, tx.tenant_id, cs.base_revision_id, kinds=("ApprovalPolicy", "Settings")
    )
    policies: dict[str, dict[str, Any]] = {}
    for path, content in base.items():
        if path != SETTINGS_PATH and isinstance(oid := parse_path(path), ObjectId):
            policies[oid.name] = parse(content)
    settings = parse(base[SETTINGS_PATH]) if SETTINGS_PATH in base else None
    rows = await store_reviews.list_reviews(tx.conn, tx.tenant_id, cs.id)
    reviews = [
        approvals.Review(
            str(r.reviewer_id),
            _DECISIONS[r.decision],
            r.digest,
            frozenset(r.acting_teams),
            r.created_at,
            str(r.id),
        )
        for r in rows
    ]
    latest = approvals.latest_reviews(reviews, cs.digest)
    approving = [UUID(r.reviewer) for r in latest.values() if r.decision == "approve"]
    eligible = await eligible_reviewers(tx, approving, changes.target)
    teams = await store_reviews.team_members(tx.conn, tx.tenant_id)
    # The impact of the last validation: its count, and the labels of the impacted agents'
    # hosts, which selector conditions and @hostOwners read
    counted = cs.impact.get("agents") if isinstance(cs.impact, dict) else None
    agents = counted if isinstance(counted, int) else 0
    hosts = await fleet_artifacts.impact_host_labels(tx.conn, tx.tenant_id, cs.id)
    return approvals.evaluate(
        policies,
        approvals.minimum_approvals(settings),
        changes.files,
        approvals.Impact(agents, hosts),
        reviews,
        digest=cs.digest,
        author=str(cs.author_id),
        team_members={slug: {str(u) for u in users} for slug, users in teams.items()},
        eligible=eligible.__contains__,
    )


async def requirements_doc(tx: TenantTx, cs: ChangeSet, changes: Changes) -> dict[str, Any]:
    """``change_set.requirements``, with the digest it was computed at."""
    return {**(await requirements(tx, cs, changes)).to_json(), "digest": cs.digest.hex()}


async def submit_change_set(ctx: Ctx, ref: Ref, *, seen: bytes | None) -> ChangeSet:
    """draft -> in_review: by the author, with a successful validation of this digest."""
    async with tenant_tx(ctx) as tx:
        cs = await load(tx, ref, lock=True)
        require_state(cs, "draft")
        require_digest(cs, seen)
        require_author(tx, cs)
        rows = await store.overlay(tx.conn, tx.tenant_id, cs.id)
        if not rows:
            raise Empty("edit a file first")
        if not cs.validated:
            raise NotValidated("validate the change set first")
        changes = await changes_of(tx, cs.base_revision_id, rows)
        require_cover(tx, "change_set.author", changes.target)
        fields = {
            "state": "in_review",
            "submitted_at": NOW,
            "requirements": await requirements_doc(tx, cs, changes),
        }
        cs = await store.update_change_set(tx.conn, tx.tenant_id, cs.id, fields)
        await tx.audit("change_set.submit", "change_set", cs.id, {"digest": cs.digest.hex()})
        return cs


def _team_slugs(required: approvals.Requirements) -> set[str]:
    return {team for t in required.teams for team in t.teams}


async def review_change_set(
    ctx: Ctx,
    ref: Ref,
    decision: str,
    *,
    seen: bytes | None,
    comment: str | None = None,
    acting_teams: Iterable[str] | None = None,
) -> tuple[ChangeSet, Review]:
    """Approve or reject (in review, ``change_set.review``) or comment (``change_set.comment``)
    at the digest the caller saw. ``acting_teams`` defaults to the required teams the reviewer
    is a member of, and is narrowed to teams they are a member of."""
    principal = ctx.principal
    if principal is None or principal.kind != "human":
        raise HumanOnly("service accounts and the system cannot review")
    verdict = _DECISIONS.get(decision)
    if verdict is None:
        raise errors.InvalidInput("approve, reject or comment", field="decision")
    async with tenant_tx(ctx) as tx:
        cs = await load(tx, ref, lock=True)
        rows = await store.overlay(tx.conn, tx.tenant_id, cs.id)
        changes = await changes_of(tx, cs.base_revision_id, rows)
        if verdict == "comment":
            require_state(cs, *OPEN)
            tx.require("change_set.comment")
        else:
            require_state(cs, "in_review")
            tx.require("change_set.review", changes.target)
        require_digest(cs, seen)
        if verdict == "approve" and cs.author_id == principal.user_id:
            # it would never count (architecture.md §3.5): refused now, not at merge
            raise SelfApproval("ask a reviewer who is not the author; your approval never counts")
        teams = await store_reviews.team_members(tx.conn, tx.tenant_id)
        mine = {slug for slug, users in teams.items() if principal.user_id in users}
        acting: set[str] = set()
        if verdict == "approve":
            wanted = _team_slugs(await requirements(tx, cs, changes))
            acting = mine & (wanted if acting_teams is None else set(acting_teams))
        review = await store_reviews.insert_review(
            tx.conn,
            tx.tenant_id,
            uuid7(),
            change_set_id=cs.id,
            reviewer_id=principal.user_id,
            decision=verdict,
            digest=cs.digest,
            acting_teams=sorted(acting),
            comment=comment,
        )
        doc = await requirements_doc(tx, cs, changes)
        cs = await store.update_change_set(tx.conn, tx.tenant_id, cs.id, {"requirements": doc})
        details = {
            "review_id": str(review.id),
            "digest": cs.digest.hex(),
            "acting_teams": sorted(acting),
        }
        await tx.audit(f"change_set.{verdict}", "change_set", cs.id, details)
        return cs, review


async def list_reviews(ctx: Ctx, ref: Ref) -> list[Review]:
    async with tenant_tx(ctx) as tx:
        tx.require("spec.read")
        cs = await load(tx, ref)
        return await store_reviews.list_reviews(tx.conn, tx.tenant_id, cs.id)
