"""Pins: hold one agent, or the agents of some kinds on hosts a selector matches, at a
revision, with a reason and an optional expiry (schema: pin). A pin beats a rollout
assignment and the release pointer (actions/fleet_rule.py); a pinned agent leaves its rollout
stage's guardrails. Creating and deleting are audited; the NOTIFY wakes the reconciler, which
moves the agents at once.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any
from uuid import UUID

from platformkit.ids import uuid7

from strataplane import errors
from strataplane.actions.access import TenantTx, tenant_tx
from strataplane.actions.context import Ctx
from strataplane.actions.fleet_inventory import _agent
from strataplane.domain.spec.diagnostics import SpecError
from strataplane.domain.spec.selectors import selector_from_json
from strataplane.store import fleet_notify, pins, revisions
from strataplane.store.pins import PinRow

__all__ = ["create_pin", "delete_pin", "list_pins"]

KINDS = ("telegraf", "elastic-agent", "strataplane-agent", "vector")


async def _check_revision(tx: TenantTx, revision_id: int) -> None:
    if revision_id < 1 or await revisions.get_revision(tx.conn, tx.tenant_id, revision_id) is None:
        raise errors.PinInvalid(f"no revision r{revision_id}", field="revision")


async def create_pin(
    ctx: Ctx,
    *,
    revision_id: int,
    reason: str,
    agent_id: UUID | None = None,
    selector: dict[str, Any] | None = None,
    agent_kinds: list[str] | None = None,
    expires_at: datetime | None = None,
) -> PinRow:
    if (agent_id is None) == (selector is None):
        raise errors.PinInvalid("pin either one agent or a selector", field="agent_id")
    if not reason.strip() or len(reason) > 1000:
        raise errors.PinInvalid("say why, in 1 to 1000 characters", field="reason")
    if expires_at is not None and expires_at <= datetime.now(UTC):
        raise errors.PinInvalid("the expiry must be in the future", field="expires_at")
    if selector is not None:
        try:
            selector_from_json(selector)
        except SpecError as exc:
            raise errors.PinInvalid(str(exc), field="selector") from None
        kinds = agent_kinds or ["telegraf"]
        if any(k not in KINDS for k in kinds):
            raise errors.PinInvalid(f"agent kinds are {', '.join(KINDS)}", field="agent_kinds")
    async with tenant_tx(ctx) as tx:
        if agent_id is not None:
            await _agent(tx, agent_id, "pin.manage")
        else:
            tx.require("pin.manage")
        await _check_revision(tx, revision_id)
        row = await pins.insert_pin(
            tx.conn,
            tx.tenant_id,
            uuid7(),
            revision_id=revision_id,
            reason=reason.strip(),
            created_by=ctx.user_id,
            agent_instance_id=agent_id,
            selector=selector,
            agent_kinds=kinds if selector is not None else None,
            expires_at=expires_at,
        )
        await fleet_notify.release_moved(tx.conn, tx.tenant_id)
        details = {
            "revision": revision_id,
            "reason": row.reason,
            "agent": str(agent_id) if agent_id else None,
            "selector": selector,
            "expires_at": expires_at.isoformat() if expires_at else None,
        }
        await tx.audit("pin.create", "pin", row.id, details)
        return row


async def list_pins(ctx: Ctx, *, active_only: bool = False) -> list[PinRow]:
    async with tenant_tx(ctx) as tx:
        tx.require("inventory.read")
        return await pins.list_pins(tx.conn, tx.tenant_id, active_only=active_only)


async def delete_pin(ctx: Ctx, pin_id: UUID) -> None:
    async with tenant_tx(ctx) as tx:
        row = await pins.get_pin(tx.conn, tx.tenant_id, pin_id)
        if row is None:
            raise errors.PinNotFound()
        if row.agent_instance_id is not None:
            await _agent(tx, row.agent_instance_id, "pin.manage")
        else:
            tx.require("pin.manage")
        await pins.delete_pin(tx.conn, tx.tenant_id, pin_id)
        await fleet_notify.release_moved(tx.conn, tx.tenant_id)
        await tx.audit("pin.delete", "pin", pin_id, {"revision": row.revision_id})
