"""Jobs ``keys.rotate`` and ``retention.tokens`` (daily, data model §1.11, §5.3).

``keys.rotate``, each part safe to repeat:

- data keys: a tenant whose active data key is ``DEK_MAX_AGE`` (90 days) old gets a new one
  (``actions.keys.rotate_data_key``, audited ``key.rotate`` with reason ``schedule``);
- re-wrap: every usable data key still wrapped under an older KEK (the deployment keyring was
  rotated, or the tenant changed its KMS key) is wrapped again under the current one, which the
  reads also do lazily;
- signing keys: once the newest usable key is ``SIGNING_RENEW`` (150 days) old a new one is
  added, and it signs from then on; a key ``SIGNING_MAX_AGE`` (180 days) old is retired once a
  newer key has signed for ``SIGNING_OVERLAP`` (30 days). A retired key accepts no credential
  but stays in the JWKS, so the receipts and checkpoints it signed stay verifiable.

``retention.tokens``: integration tokens revoked more than 90 days ago are deleted, one audit row
``token.purge`` per tenant naming them (the revocation's own audit row stays).
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from platformkit.db.scope import Pool, tenant_transaction, transaction
from platformkit.jobs import LeaderLoop, LockKey, shard_keys

from agentbus.actions.audit import record_action
from agentbus.actions.context import Actor, Ctx
from agentbus.actions.keys import rotate_data_key
from agentbus.db import SCOPE
from agentbus.gateway.actions.signing import SigningKeys, raw_public, wrap_private_key
from agentbus.ids import format_id, new_signing_kid
from agentbus.store import tenant_keys
from agentbus.tenant_crypto import TenantCrypto

log = logging.getLogger(__name__)

KEYS_LOOP, TOKENS_LOOP = "agentbus.keys.rotate", "agentbus.retention.tokens"
DAILY = 24 * 3600.0
DEK_MAX_AGE = timedelta(days=90)
SIGNING_MAX_AGE = timedelta(days=180)
SIGNING_OVERLAP = timedelta(days=30)
SIGNING_RENEW = SIGNING_MAX_AGE - SIGNING_OVERLAP
REVOKED_TOKEN_AGE = timedelta(days=90)


@dataclass
class KeyJobs:
    pool: Pool
    crypto: TenantCrypto
    signing: SigningKeys

    async def tenants(self) -> list[uuid.UUID]:
        async with transaction(self.pool) as conn:
            cur = await conn.execute("SELECT id FROM platform_tenants() WHERE status = 'active'")
            return [r["id"] for r in await cur.fetchall()]

    async def rotate_data_keys(self, now: datetime) -> int:
        rotated = 0
        ctx = Ctx(self.pool, Actor.system("keys.rotate"))
        for tenant_id in await self.tenants():
            try:
                row = await self.crypto.store.active_row(tenant_id)
                if row is None or now - row["created_at"] >= DEK_MAX_AGE:
                    await rotate_data_key(ctx, tenant_id, self.crypto, reason="schedule")
                    rotated += 1
                await self.rewrap_stale(tenant_id)
            except Exception:
                log.exception("keys.rotate of tenant %s failed; trying again next run", tenant_id)
        return rotated

    async def rewrap_stale(self, tenant_id: uuid.UUID) -> int:
        async with tenant_transaction(self.pool, SCOPE, tenant_id) as conn:
            rows = await tenant_keys.usable_rows(conn, tenant_id)
            cur = await conn.execute("SELECT kek_ref FROM tenants WHERE id = %s", (tenant_id,))
            tenant = await cur.fetchone()
        done = 0
        for row in rows:
            row = {**row, "tenant_kek_ref": tenant["kek_ref"] if tenant else row["kek_ref"]}
            if not self.crypto.current(row):
                material = await self.crypto.material(tenant_id, row)
                done += await self.crypto.rewrap(tenant_id, row, material)
        return done

    async def rotate_signing_keys(self, now: datetime) -> dict[str, Any]:
        """Add a key or retire old ones as the schedule says; what it did."""
        async with transaction(self.pool) as conn:
            cur = await conn.execute(
                "SELECT kid, created_at, retired_at FROM signing_keys_public ORDER BY created_at"
            )
            keys = await cur.fetchall()
        usable = [k for k in keys if k["retired_at"] is None]
        added, retired = None, []
        if not usable or now - usable[-1]["created_at"] >= SIGNING_RENEW:
            added = await self.add_signing_key()
        elif now - usable[-1]["created_at"] >= SIGNING_OVERLAP:
            for key in usable[:-1]:
                if now - key["created_at"] >= SIGNING_MAX_AGE:
                    async with transaction(self.pool) as conn:
                        await conn.execute("SELECT retire_signing_key(%s)", (key["kid"],))
                    retired.append(key["kid"])
        if added or retired:
            await self.signing.refresh(self.pool)
            log.info("signing keys: added %s, retired %s", added, retired)
        return {"added": added, "retired": retired}

    async def add_signing_key(self) -> str:
        kid, key = new_signing_kid(), Ed25519PrivateKey.generate()
        wrapped = wrap_private_key(self.signing.keyring, kid, key)
        async with transaction(self.pool) as conn:
            await conn.execute(
                "SELECT create_signing_key(%s, %s, %s, false)",
                (kid, raw_public(key.public_key()), wrapped),
            )
        return kid

    async def run_keys(self, now: datetime | None = None) -> dict[str, Any]:
        now = now or datetime.now(UTC)
        rotated = await self.rotate_data_keys(now)
        return {"data_keys_rotated": rotated, **await self.rotate_signing_keys(now)}

    async def purge_tokens(self, now: datetime | None = None) -> int:
        cutoff = (now or datetime.now(UTC)) - REVOKED_TOKEN_AGE
        ctx, purged = Ctx(self.pool, Actor.system("retention.tokens")), 0
        for tenant_id in await self.tenants():
            async with tenant_transaction(self.pool, SCOPE, tenant_id) as conn:
                cur = await conn.execute(
                    "DELETE FROM integration_tokens WHERE tenant_id = %s AND revoked_at < %s"
                    " RETURNING id",
                    (tenant_id, cutoff),
                )
                ids = [format_id("tok", r["id"]) for r in await cur.fetchall()]
                if ids:
                    await record_action(
                        conn, ctx, tenant_id, "token.purge", target_type="tenant",
                        target_id=format_id("ten", tenant_id), details={"tokens": ids},
                    )  # fmt: skip
            purged += len(ids)
        return purged


def key_loops(jobs: KeyJobs) -> list[LeaderLoop]:
    async def keys(_key: LockKey) -> None:
        await jobs.run_keys()

    async def tokens(_key: LockKey) -> None:
        await jobs.purge_tokens()

    return [
        LeaderLoop(jobs.pool, shard_keys(KEYS_LOOP, 1), DAILY, keys),
        LeaderLoop(jobs.pool, shard_keys(TOKENS_LOOP, 1), DAILY, tokens),
    ]
