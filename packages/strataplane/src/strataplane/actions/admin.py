"""What the command line does through the actions: bootstrap admins and verify chains.

The CLI holds the administrative URL; it acts as the system over the application's own login
(so row-level security applies as it does in the server).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING
from uuid import UUID

from platformkit.db.pool import open_pool
from platformkit.db.scope import platform_transaction, transaction

from strataplane import db, errors
from strataplane.actions import tenant_admins, users
from strataplane.actions.audit import ChainCheck, verify_platform_chain, verify_tenant_chain
from strataplane.actions.context import Services, system_ctx
from strataplane.actions.sessions import resolve_tenant
from strataplane.domain.audit_bucket import BucketInvalid, bucket_location
from strataplane.settings import Settings
from strataplane.store import tenants
from strataplane.store import users as users_store

if TYPE_CHECKING:
    from strataplane.controllers.audit_bucket import TenantShipped


@asynccontextmanager
async def cli_services(admin_url: str) -> AsyncIterator[Services]:
    settings = Settings()
    password = settings.database_app_password
    url = db.app_url(admin_url, password.get_secret_value() if password else None)
    pool = await open_pool(url, min_size=1, max_size=2, name="strataplane-cli")
    try:
        async with transaction(pool) as conn:
            await tenants.ensure_installation(conn, settings.shards)
        yield Services(pool, settings)
    finally:
        await pool.close()


async def create_platform_admin(
    admin_url: str, username: str, display_name: str, password: str
) -> UUID:
    async with cli_services(admin_url) as services:
        user = await users.create_user(
            system_ctx(services), username, display_name, password, platform_admin=True
        )
    return user.id


async def restore_tenant_admin(admin_url: str, tenant: str, username: str) -> bool:
    """Make the local user ``username`` an admin of the tenant (id or slug) again."""
    async with cli_services(admin_url) as services:
        tenant_id = await resolve_tenant(services, tenant)
        async with transaction(services.pool) as conn:
            found = await users_store.get_local_login(conn, username)
        if found is None:
            raise errors.UserNotFound(f"no local user {username!r}", field="username")
        return await tenant_admins.restore_tenant_admin(
            system_ctx(services), tenant_id, found[0].id
        )


async def verify_chains(admin_url: str, tenant: str | None, platform: bool) -> list[ChainCheck]:
    """The platform chain and every tenant's chain, or only the one asked for."""
    async with (
        cli_services(admin_url) as services,
        platform_transaction(services.pool, db.SCOPE) as conn,
    ):
        if tenant is not None:
            ids = [await resolve_tenant(services, tenant)]
        else:
            found = await (await conn.execute("SELECT id FROM tenant ORDER BY slug")).fetchall()
            ids = [] if platform else [row["id"] for row in found]
        checks = [] if tenant is not None else [await verify_platform_chain(conn)]
        for tenant_id in ids:
            checks.append(await verify_tenant_chain(conn, tenant_id))
    return checks


async def ship_audit(
    admin_url: str,
    bucket_url: str,
    tenants: list[str],
    *,
    batch: int,
    follow: float | None,
    report: Callable[[list[TenantShipped]], None],
) -> list[TenantShipped]:
    """Ship the audit chains of ``tenants`` (every tenant when empty) to ``bucket_url``
    (``s3://bucket/prefix``, or any URL obstore opens; credentials from the AWS_ variables);
    with ``follow``, a pass every ``follow`` seconds until interrupted. Each pass is reported."""
    from obstore.exceptions import BaseError as ObstoreError
    from obstore.store import from_url

    from strataplane.controllers.audit_bucket import BucketShipper

    try:
        root, prefix = bucket_location(bucket_url)
        store = from_url(root)
    except (BucketInvalid, ObstoreError) as exc:
        reason = " ".join(str(exc).split("Debug source")[0].split())
        raise errors.InvalidInput(f"bucket: {reason}", field="bucket") from None
    async with cli_services(admin_url) as services:
        ids = [await resolve_tenant(services, t) for t in tenants] or None
        shipper = BucketShipper(services.pool, store, prefix, batch=batch)
        while True:
            done = await shipper.run_once(ids)
            report(done)
            if follow is None:
                return done
            await asyncio.sleep(follow)
