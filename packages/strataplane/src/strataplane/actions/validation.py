"""Validation of a change set as an operation (docs/strataplane/architecture.md §3.4).

The request answers with an ``operation`` row (kind ``change_set.validate``; a repeat while one
is queued or running returns it) and spawns an absurd task in the same transaction, so the task
exists exactly when the request committed. The task:

1. reads digest, base and overlay under the change set's row lock, and commits;
2. unlocked, builds the resulting tree and runs ``validate_tree`` (files, kinds and fields,
   selectors and versions, references), the plugin instances against the catalog (SP-2010)
   and the author's coverage (SP-6001, SP-6003);
3. locks the row again and stores the diagnostics only while the change set is still a draft
   with the digest it validated; otherwise the result is ``{"stale": true}``.

Before each step the operation's creator is rechecked (membership, bindings, a revoked or
expired token), so removing a permission stops a running validation.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any
from uuid import UUID

from platformkit.db.scope import Pool, tenant_transaction
from platformkit.http import ProblemError
from platformkit.ids import uuid7
from platformkit.jobs import Task, TaskContext, spawn

from strataplane import authz, errors
from strataplane.actions import fleet_hooks
from strataplane.actions.access import TenantTx, tenant_tx
from strataplane.actions.change_sets import (
    Changes,
    Ref,
    changes_of,
    load,
    require_cover,
    require_state,
)
from strataplane.actions.context import Ctx, Principal, Services, system_ctx, user_ctx
from strataplane.actions.reviews import requirements_doc
from strataplane.agents.settings import FleetSettings
from strataplane.catalog.service import CATALOG
from strataplane.db import QUEUE, SCOPE
from strataplane.domain.spec.catalog_check import check_catalog
from strataplane.domain.spec.diagnostics import Diagnostic, sort_diagnostics, truncate
from strataplane.domain.spec.validate import TreeContext, validate_tree
from strataplane.settings import Settings
from strataplane.store import bindings, blobs, members, objects, operations, tokens
from strataplane.store import change_sets as store
from strataplane.store import reviews as store_reviews
from strataplane.store import secrets as secret_store
from strataplane.store.operations import Operation

TASK = "change_set.validate"
log = logging.getLogger("strataplane.validation")


def params_for(op: Operation, principal: Principal | None) -> dict[str, Any]:
    """The task's parameters: the operation and its creator, rechecked at every step."""
    creator = None
    if principal is not None:
        token = str(principal.token_id) if principal.token_id is not None else None
        creator = {
            "user_id": str(principal.user_id),
            "kind": principal.kind,
            "display_name": principal.display_name,
            "token_id": token,
        }
    return {
        "operation_id": str(op.id),
        "tenant_id": str(op.tenant_id),
        "change_set_id": op.object_id,
        "creator": creator,
    }


async def request_validation(ctx: Ctx, ref: Ref) -> tuple[Operation, bool]:
    """The validation operation of a draft; the flag says whether this call created it."""
    async with tenant_tx(ctx) as tx:
        cs = await load(tx, ref, lock=True)
        require_state(cs, "draft")
        rows = await store.overlay(tx.conn, tx.tenant_id, cs.id)
        require_cover(
            tx, "change_set.author", (await changes_of(tx, cs.base_revision_id, rows)).target
        )
        op, created = await operations.insert_or_get_active(
            tx.conn,
            uuid7(),
            tenant_id=tx.tenant_id,
            kind=TASK,
            object_id=str(cs.id),
            created_by=ctx.user_id,
        )
        if created:
            params = params_for(op, ctx.principal)
            await spawn(tx.conn, QUEUE, TASK, params, idempotency_key=f"{TASK}:{op.id}")
            details = {"operation_id": str(op.id), "digest": cs.digest.hex()}
            await tx.audit("change_set.validate", "change_set", cs.id, details)
    return op, created


async def access_operation(ctx: Ctx, operation_id: UUID) -> Operation:
    async with tenant_tx(ctx) as tx:
        tx.require("spec.read")
        op = await operations.get_operation(tx.conn, tx.tenant_id, operation_id)
    if op is None:
        raise errors.OperationNotFound()
    return op


@dataclass(frozen=True)
class _Snapshot:
    digest: bytes
    base: int
    overlay: dict[str, bytes | None]
    changes: Changes
    author: list[authz.Binding]


async def _creator(pool: Pool, tenant_id: UUID, creator: dict[str, Any] | None) -> Ctx:
    services = Services(pool, Settings())
    if creator is None:
        return system_ctx(services, tenant_id)
    roles: frozenset[str] | None = None
    token_id = UUID(creator["token_id"]) if creator["token_id"] else None
    if token_id is not None:
        async with tenant_transaction(pool, SCOPE, tenant_id) as conn:
            token = await tokens.get_token(conn, tenant_id, token_id)
        if (
            token is None
            or token.revoked_at is not None
            or (token.expires_at is not None and token.expires_at <= datetime.now(UTC))
        ):
            raise errors.AuthRequired("the token that requested the validation is not valid now")
        roles = frozenset(token.roles) if token.roles is not None else None
    principal = Principal(
        UUID(creator["user_id"]),
        creator["kind"],
        creator["display_name"],
        False,
        tenant_id,
        token_id=token_id,
        token_roles=roles,
    )
    return user_ctx(services, principal)


async def _read(tx: TenantTx, cs_id: UUID) -> _Snapshot | None:
    cs = await load(tx, cs_id, lock=True)
    if cs.state != "draft":
        return None
    rows = await store.overlay(tx.conn, tx.tenant_id, cs.id)
    changes = await changes_of(tx, cs.base_revision_id, rows)
    require_cover(tx, "change_set.author", changes.target)
    member = await members.get_member(tx.conn, tx.tenant_id, cs.author_id)
    human = member is not None and member.kind == "human"
    held = await bindings.effective_bindings(tx.conn, tx.tenant_id, cs.author_id, with_teams=human)
    author = [
        authz.Binding(b.id, b.role, b.scope_kind, b.scope_team_id, b.scope_selector) for b in held
    ]
    overlay = {p: r.blob_hash for p, r in rows.items()}
    return _Snapshot(cs.digest, cs.base_revision_id, overlay, changes, author)


def _coverage(snap: _Snapshot) -> list[Diagnostic]:
    """SP-6001 / SP-6003 for each changed file the author's bindings do not cover."""
    found = []
    by_selector = any(b.scope_kind == "selector" for b in snap.author)
    for f, change in zip(snap.changes.files, snap.changes.target.files, strict=True):
        if authz.decide(snap.author, "change_set.author", authz.Target(files=(change,))).allowed:
            continue
        if by_selector and f.kind in authz.POLICY_KINDS:
            found.append(
                Diagnostic("SP-6003", f.path, None, f"a selector scope cannot cover {f.kind}")
            )
        else:
            owners = " and ".join(sorted({o for o in (f.owner_before, f.owner_after) if o}))
            message = f"the author's bindings do not cover owner {owners or '(none)'}"
            found.append(Diagnostic("SP-6001", f.path, "owner", message))
    return found


async def _check(tx: TenantTx, snap: _Snapshot) -> tuple[list[Diagnostic], dict[str, bytes]]:
    """The diagnostics of the resulting tree, and the tree (reads only, no lock)."""
    base = await objects.contents_at(tx.conn, tx.tenant_id, snap.base)
    written = await blobs.get_blobs(tx.conn, tx.tenant_id, [h for h in snap.overlay.values() if h])
    teams = await store_reviews.team_ids(tx.conn, tx.tenant_id)
    tree = dict(base)
    for path, blob in snap.overlay.items():
        if blob is None:
            tree.pop(path, None)
        else:
            tree[path] = written[blob]
    context = TreeContext(
        teams=frozenset(teams),
        changed_paths=frozenset(snap.overlay),
        base_paths=frozenset(base),
        secrets_with_versions=await secret_store.names_with_versions(tx.conn, tx.tenant_id),
        secrets_with_values=frozenset(await secret_store.current_versions(tx.conn, tx.tenant_id)),
    )
    checked = validate_tree(tree, context)
    bundles = await CATALOG.all_bundles(tx.conn, "telegraf")
    schema = check_catalog(checked.values, checked.facts, tree, bundles)
    return [*checked.diagnostics, *schema, *_coverage(snap)], tree


def _document(snap: _Snapshot, found: list[Diagnostic]) -> dict[str, Any]:
    """``change_set.validation`` (spec-format.md §5.2)."""
    diagnostics = sort_diagnostics(found)
    kept, dropped = truncate(diagnostics)
    return {
        "digest": snap.digest.hex(),
        "ok": not any(d.severity == "error" for d in diagnostics),
        "finishedAt": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
        "diagnostics": [d.to_json() for d in kept],
        "truncated": dropped,
    }


async def _store(
    tx: TenantTx, cs_id: UUID, snap: _Snapshot, found: list[Diagnostic], tree: dict[str, bytes]
) -> dict[str, Any] | None:
    """Under the row lock, only while the draft still has the digest validated: the impact
    set (the fleet renders every agent at base and result), diagnostics and requirements."""
    cs = await load(tx, cs_id, lock=True)
    if cs.digest != snap.digest or cs.state != "draft":
        return None
    impact = await fleet_hooks.change_set_impact(
        tx.conn,
        tx.tenant_id,
        cs.id,
        cs.base_revision_id,
        tree,
        agent_url=FleetSettings().agent_url,
    )
    doc = _document(snap, [*found, *impact.diagnostics])
    validated = cs.digest if doc["ok"] else None
    rows = await store.overlay(tx.conn, tx.tenant_id, cs.id)
    changes = await changes_of(tx, cs.base_revision_id, rows)
    cs = replace(cs, impact=impact.summary)
    fields = {
        "validation": doc,
        "validated_digest": validated,
        "impact": impact.summary,
        "requirements": await requirements_doc(tx, cs, changes),
    }
    await store.update_change_set(tx.conn, tx.tenant_id, cs.id, fields)
    errors_found = sum(d["severity"] == "error" for d in doc["diagnostics"])
    details = {"digest": doc["digest"], "ok": doc["ok"], "errors": errors_found, "stored": True}
    await tx.audit("change_set.validate", "change_set", cs.id, details)
    return doc


async def _progress(pool: Pool, tenant_id: UUID, op_id: UUID, value: float) -> None:
    async with tenant_transaction(pool, SCOPE, tenant_id) as conn:
        await operations.set_running(conn, op_id, value)


async def _finish(pool: Pool, tenant_id: UUID, op_id: UUID, **outcome: Any) -> None:
    async with tenant_transaction(pool, SCOPE, tenant_id) as conn:
        await operations.finish(conn, op_id, **outcome)


async def run_validation(pool: Pool, params: dict[str, Any]) -> dict[str, Any]:
    """The task body; safe to repeat (a finished operation returns its result)."""
    op_id, tenant_id = UUID(params["operation_id"]), UUID(params["tenant_id"])
    cs_id = UUID(params["change_set_id"])
    async with tenant_transaction(pool, SCOPE, tenant_id) as conn:
        op = await operations.get_operation(conn, tenant_id, op_id)
    if op is None or op.finished_at is not None:
        return {"done": True}
    try:
        await _progress(pool, tenant_id, op_id, 0.0)
        ctx = await _creator(pool, tenant_id, params["creator"])
        async with tenant_tx(ctx) as tx:
            snap = await _read(tx, cs_id)
        result: dict[str, Any] = {"stale": True}
        if snap is not None:
            await _progress(pool, tenant_id, op_id, 0.25)
            async with tenant_tx(ctx) as tx:
                require_cover(tx, "change_set.author", snap.changes.target)
                found, tree = await _check(tx, snap)
            await _progress(pool, tenant_id, op_id, 0.6)
            async with tenant_tx(ctx) as tx:
                doc = await _store(tx, cs_id, snap, found, tree)
            result = {"stale": doc is None, "digest": snap.digest.hex()}
            if doc is not None:
                result |= {
                    "ok": doc["ok"],
                    "diagnostics": len(doc["diagnostics"]) + doc["truncated"],
                }
        await _finish(pool, tenant_id, op_id, result=result)
        return result
    except ProblemError as exc:
        problem = {
            "code": exc.code,
            "status": exc.status,
            "title": exc.title,
            "detail": exc.detail or exc.title,
        }
    except Exception as exc:
        log.exception("validation %s failed", op_id)
        problem = {
            "code": "internal",
            "status": 500,
            "title": "Validation failed",
            "detail": type(exc).__name__,
        }
    await _finish(pool, tenant_id, op_id, error=problem)
    return {"error": problem}


def tasks(pool: Pool) -> list[Task]:
    async def validate(params: Any, ctx: TaskContext) -> Any:
        return await ctx.step("validate", lambda: run_validation(pool, params))

    return [Task(TASK, validate, max_attempts=3)]
