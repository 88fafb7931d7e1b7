"""Service accounts: a user of kind 'service' (issuer 'service', subject its id), a member of
exactly one tenant, with a service_account row. They act only through API tokens.

Deleting one deletes its user, membership, tokens and bindings. Once it has acted, rows still
reference its user (change sets, reviews, revisions, operations, bindings or service accounts it
created; later rollouts and pins), and the deletion is refused with 409 service_account.in_use.
"""

from __future__ import annotations

from uuid import UUID

import psycopg
from platformkit.ids import uuid7

from strataplane import errors
from strataplane.actions.access import TenantTx, tenant_tx
from strataplane.actions.context import Ctx
from strataplane.store import members, service_accounts, teams, users
from strataplane.store.service_accounts import ServiceAccount


async def _check_team(tx: TenantTx, team_id: UUID | None) -> None:
    if team_id is not None and await teams.get_team(tx.conn, tx.tenant_id, team_id) is None:
        raise errors.TeamNotFound(field="owner_team_id")


async def create_service_account(
    ctx: Ctx, name: str, *, description: str | None = None, owner_team_id: UUID | None = None
) -> ServiceAccount:
    async with tenant_tx(ctx) as tx:
        tx.require("tenant.admin")
        await _check_team(tx, owner_team_id)
        account_id = uuid7()
        await users.insert_user(
            tx.conn,
            account_id,
            kind="service",
            issuer=users.SERVICE,
            subject=str(account_id),
            display_name=name,
        )
        await members.insert_member(tx.conn, tx.tenant_id, account_id, "service")
        try:
            account = await service_accounts.insert_service_account(
                tx.conn, tx.tenant_id, account_id, name, description, owner_team_id, ctx.user_id
            )
        except psycopg.errors.UniqueViolation:
            raise errors.ServiceAccountNameTaken(field="name") from None
        await tx.audit("service_account.create", "service_account", account_id, {"name": name})
    return account


async def list_service_accounts(
    ctx: Ctx, *, after: str | None = None, limit: int = 100
) -> list[ServiceAccount]:
    async with tenant_tx(ctx) as tx:
        tx.require("tenant.admin")
        return await service_accounts.list_service_accounts(
            tx.conn, tx.tenant_id, after=after, limit=limit
        )


async def _account(tx: TenantTx, account_id: UUID) -> ServiceAccount:
    account = await service_accounts.get_service_account(tx.conn, tx.tenant_id, account_id)
    if account is None:
        raise errors.ServiceAccountNotFound()
    return account


async def access_service_account(ctx: Ctx, account_id: UUID) -> ServiceAccount:
    async with tenant_tx(ctx) as tx:
        tx.require("tenant.admin")
        return await _account(tx, account_id)


async def update_service_account(
    ctx: Ctx, account_id: UUID, *, description: str | None, owner_team_id: UUID | None
) -> ServiceAccount:
    async with tenant_tx(ctx) as tx:
        tx.require("tenant.admin")
        await _account(tx, account_id)
        await _check_team(tx, owner_team_id)
        account = await service_accounts.update_service_account(
            tx.conn,
            tx.tenant_id,
            account_id,
            description=description,
            owner_team_id=owner_team_id,
        )
        if account is None:
            raise errors.ServiceAccountNotFound()
        await tx.audit("service_account.update", "service_account", account_id)
    return account


async def delete_service_account(ctx: Ctx, account_id: UUID) -> None:
    async with tenant_tx(ctx) as tx:
        tx.require("tenant.admin")
        account = await _account(tx, account_id)
        acted = await service_accounts.acted_in(tx.conn, account_id)
        if acted:
            raise errors.ServiceAccountInUse(
                "revoke its tokens and remove its role bindings instead", references=acted
            )
        try:
            async with tx.conn.transaction():  # savepoint: a later table's reference
                await users.delete_user(tx.conn, account_id)
        except psycopg.errors.ForeignKeyViolation as exc:
            table = exc.diag.table_name or "another table"
            raise errors.ServiceAccountInUse(
                "revoke its tokens and remove its role bindings instead", references=[table]
            ) from None
        await tx.audit(
            "service_account.delete", "service_account", account_id, {"name": account.name}
        )
