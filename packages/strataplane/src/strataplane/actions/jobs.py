"""Operations' task handlers, run by the server's JobRunner on queue 'strataplane'."""

from __future__ import annotations

import logging
from typing import Any
from uuid import UUID

from platformkit.db.scope import Pool, platform_transaction
from platformkit.jobs import Task, TaskContext

from strataplane.actions import validation
from strataplane.actions.tenants import DELETE_TASK
from strataplane.db import SCOPE
from strataplane.store import operations, platform_audit, purge, tenants

log = logging.getLogger("strataplane.jobs")


async def run_tenant_deletion(pool: Pool, operation_id: UUID, tenant_id: UUID) -> dict[str, Any]:
    """Remove the tenant's rows, then the tenant; idempotent, so a retried run is safe."""
    async with platform_transaction(pool, SCOPE) as conn:
        await operations.set_running(conn, operation_id)
    try:
        async with platform_transaction(pool, SCOPE) as conn:
            tenant = await tenants.get_tenant(conn, tenant_id, lock=True)
            deleted = await purge.purge_tenant(conn, tenant_id) if tenant is not None else {}
            result = {"deleted": {k: v for k, v in deleted.items() if v}}
            await operations.finish(conn, operation_id, result=result)
            await platform_audit.append(
                conn,
                platform_audit.PlatformEvent(
                    "system",
                    None,
                    "tenant.purge",
                    "tenant",
                    str(tenant_id),
                    tenant_id=tenant_id,
                    details=result,
                ),
            )
        return result
    except Exception as exc:
        # Recorded on the operation; requesting the deletion again starts a new one.
        log.exception("tenant deletion %s failed", operation_id)
        problem = {"code": "tenant.delete_failed", "detail": type(exc).__name__}
        async with platform_transaction(pool, SCOPE) as conn:
            await operations.finish(conn, operation_id, error=problem)
        return {"error": problem}


def tasks(pool: Pool) -> list[Task]:
    async def tenant_delete(params: Any, ctx: TaskContext) -> Any:
        op, tenant = UUID(params["operation_id"]), UUID(params["tenant_id"])
        return await ctx.step("purge", lambda: run_tenant_deletion(pool, op, tenant))

    return [Task(DELETE_TASK, tenant_delete, max_attempts=3), *validation.tasks(pool)]
