"""Tenant keys (data model §5.3, §5.4): listing the data key versions, rotating the data key on
demand, and bringing (or giving back) the tenant's own key encryption key.

Rotation gives the tenant a new active version under its current KEK; earlier versions are
retired, never destroyed, so every payload sealed under them still opens. Registering a KEK
first proves the key works (a wrap and an unwrap under the tenant's encryption context), then,
in one transaction, re-wraps every usable version under it and rotates: from then on nothing
of the tenant opens without that key, so revoking it shreds the tenant's payloads.
"""

from __future__ import annotations

import secrets
import uuid
from typing import Any

from platformkit.crypto import DataKeyUnavailableError

from agentbus.actions.access import require_tenant_admin, require_tenant_owner, tenant_scope
from agentbus.actions.audit import record_action
from agentbus.actions.context import Ctx
from agentbus.errors import RequestInvalid
from agentbus.gateway.domain.errors import KeyUnavailable
from agentbus.ids import format_id
from agentbus.kms import PLATFORM_KEK, KeyProviderError
from agentbus.store import tenant_keys, tenants
from agentbus.tenant_crypto import TenantCrypto

BYOK_PLANS = frozenset({"enterprise"})


def key_view(row: dict[str, Any]) -> dict[str, Any]:
    """A version without its wrapped bytes."""
    return {k: row[k] for k in ("version", "kek_ref", "kek_provider", "status", "created_at",
                                "retired_at")}  # fmt: skip


async def list_keys(ctx: Ctx, tenant_id: uuid.UUID) -> dict[str, Any]:
    async with tenant_scope(ctx, tenant_id) as (conn, tenant):
        await require_tenant_admin(conn, ctx, tenant_id)
        cur = await conn.execute(
            "SELECT * FROM tenant_keys WHERE tenant_id = %s ORDER BY version", (tenant_id,)
        )
        rows = await cur.fetchall()
    return {"kek_ref": tenant["kek_ref"], "versions": [key_view(r) for r in rows]}


async def rotate_data_key(
    ctx: Ctx, tenant_id: uuid.UUID, crypto: TenantCrypto, *, reason: str = "on_demand"
) -> dict[str, Any]:
    """A new active data key version (tenant owner or admin, the operator, or the schedule)."""
    async with tenant_scope(ctx, tenant_id) as (conn, _tenant):
        await require_tenant_admin(conn, ctx, tenant_id)
        try:
            row = await crypto.new_key_in(conn, tenant_id)
        except DataKeyUnavailableError as exc:
            raise KeyUnavailable(f"the tenant's key encryption key cannot wrap: {exc}") from exc
        await record_action(
            conn, ctx, tenant_id, "key.rotate", target_type="tenant_key",
            target_id=f"{format_id('ten', tenant_id)}/v{row['version']}",
            details={"version": row["version"], "kek_provider": row["kek_provider"],
                     "reason": reason},
        )  # fmt: skip
    return key_view(row)


async def _prove(crypto: TenantCrypto, tenant_id: uuid.UUID, kek_ref: str) -> None:
    probe = secrets.token_bytes(32)
    try:
        provider = crypto.providers.for_ref(kek_ref)
        row_ref, wrapped = await provider.wrap_key(kek_ref, tenant_id, probe)
        back = await provider.unwrap(row_ref, tenant_id, wrapped)
    except KeyProviderError as exc:
        raise KeyUnavailable(
            f"{kek_ref} cannot be used: grant this gateway Encrypt and Decrypt on it ({exc})"
        ) from exc
    if not secrets.compare_digest(back, probe):
        raise KeyUnavailable(f"{kek_ref} did not give back what it wrapped")


async def set_kek(
    ctx: Ctx, tenant_id: uuid.UUID, kek_ref: str, crypto: TenantCrypto
) -> dict[str, Any]:
    """Make ``kek_ref`` the tenant's KEK (tenant owner, enterprise plan, or the operator)."""
    async with tenant_scope(ctx, tenant_id) as (conn, tenant):
        await require_tenant_owner(conn, ctx, tenant_id)
        if kek_ref != PLATFORM_KEK and tenant["plan"] not in BYOK_PLANS:
            raise RequestInvalid("bring your own key is an enterprise plan feature",
                                 field="kek_ref")  # fmt: skip
    await _prove(crypto, tenant_id, kek_ref)
    async with tenant_scope(ctx, tenant_id) as (conn, tenant):
        await tenants.lock_tenant(conn, tenant_id)
        previous = tenant["kek_ref"]
        rewrapped = 0
        try:
            for row in await tenant_keys.usable_rows(conn, tenant_id):
                material = await crypto.material(tenant_id, row)
                provider = crypto.providers.for_ref(kek_ref)
                row_ref, wrapped = await provider.wrap_key(kek_ref, tenant_id, material)
                rewrapped += await tenant_keys.rewrap(
                    conn, tenant_id, row["version"], bytes(row["dek_wrapped"]), wrapped=wrapped,
                    kek_ref=row_ref, kek_provider=provider.name,
                )  # fmt: skip
            await tenants.set_kek_ref(conn, tenant_id, kek_ref)
            new = await crypto.new_key_in(conn, tenant_id)
        except (DataKeyUnavailableError, KeyProviderError) as exc:
            raise KeyUnavailable(f"the tenant's keys could not move to {kek_ref}: {exc}") from exc
        await record_action(
            conn, ctx, tenant_id, "tenant.kek.update", target_type="tenant",
            target_id=format_id("ten", tenant_id),
            details={"from": previous, "to": kek_ref, "rewrapped": rewrapped,
                     "version": new["version"]},
        )  # fmt: skip
    crypto.store.forget(tenant_id)
    return {"kek_ref": kek_ref, "rewrapped": rewrapped, "active_version": new["version"]}
