"""Alert rules and their firings: read with ``project.read``, changed with ``alert.manage``
(admins and owners), each change audited (``alert_rule.create|update|delete``). The
evaluation and the notices are ``z4j.controllers.alerts``; docs/z4j/trends-and-alerts.md is the
manual."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

from z4j.actions import audit
from z4j.actions.access import ProjectAccess, project_scope
from z4j.actions.context import Ctx
from z4j.actions.errors import AlertRuleNameTaken, AlertRuleNotFound, InvalidInput
from z4j.domain.alerts import RuleInvalid, RuleSpec, parse_rule, webhook_masked
from z4j.domain.roles import Permission
from z4j.store import alerts as store

FIRINGS_SHOWN = 50


def _parsed(values: Mapping[str, object], current: RuleSpec | None = None) -> RuleSpec:
    try:
        return parse_rule(values, current)
    except RuleInvalid as exc:
        raise InvalidInput.of_field(exc) from None


def _audited(values: dict[str, Any]) -> dict[str, Any]:
    """The audit row names a webhook's host, never its path (which often holds a token)."""
    if values.get("webhook_url"):
        values = {**values, "webhook_url": webhook_masked(values["webhook_url"])}
    return values


async def list_rules(
    ctx: Ctx, project_id: uuid.UUID
) -> tuple[ProjectAccess, list[dict[str, Any]], list[dict[str, Any]]]:
    """(access, the rules with ``firing_since``, the latest firings)."""
    async with project_scope(ctx, project_id) as (conn, access):
        rules = await store.list_rules(conn, project_id)
        firings = await store.list_firings(conn, project_id, FIRINGS_SHOWN)
    return access, rules, firings


async def create_rule(
    ctx: Ctx, project_id: uuid.UUID, values: Mapping[str, object]
) -> dict[str, Any]:
    async with project_scope(ctx, project_id, Permission.ALERT_MANAGE) as (conn, _access):
        spec = _parsed(values)
        row = await store.create_rule(conn, project_id, spec, ctx.actor_id)
        if row is None:
            raise AlertRuleNameTaken(f"A rule named {spec.name!r} exists.", field="name")
        await audit.record(
            conn, ctx.brain, "alert_rule.create", actor=ctx.actor_id, project_id=project_id,
            target_type="alert_rule", target_id=row["id"], details=_audited(spec.as_row()),
        )  # fmt: skip
        return row


async def update_rule(
    ctx: Ctx, project_id: uuid.UUID, rule_id: uuid.UUID, values: Mapping[str, object]
) -> dict[str, Any]:
    """Change the given fields (others stay)."""
    async with project_scope(ctx, project_id, Permission.ALERT_MANAGE) as (conn, _access):
        current = await store.get_rule(conn, project_id, rule_id)
        if current is None:
            raise AlertRuleNotFound(rule_id=str(rule_id))
        before = RuleSpec.of_row(current)
        after = _parsed(values, before)
        row = await store.update_rule(conn, project_id, rule_id, after)
        if row is None:
            raise AlertRuleNameTaken(f"A rule named {after.name!r} exists.", field="name")
        changed = _audited({k: v for k, v in after.as_row().items() if before.as_row()[k] != v})
        if changed:
            await audit.record(
                conn, ctx.brain, "alert_rule.update", actor=ctx.actor_id,
                project_id=project_id, target_type="alert_rule", target_id=rule_id,
                details={"name": after.name, "changed": changed},
            )  # fmt: skip
        return row


async def delete_rule(ctx: Ctx, project_id: uuid.UUID, rule_id: uuid.UUID) -> None:
    async with project_scope(ctx, project_id, Permission.ALERT_MANAGE) as (conn, _access):
        current = await store.get_rule(conn, project_id, rule_id)
        if current is None or not await store.delete_rule(conn, project_id, rule_id):
            raise AlertRuleNotFound(rule_id=str(rule_id))
        await audit.record(
            conn, ctx.brain, "alert_rule.delete", actor=ctx.actor_id, project_id=project_id,
            target_type="alert_rule", target_id=rule_id, details={"name": current["name"]},
        )  # fmt: skip
