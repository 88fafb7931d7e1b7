"""Trust anchors: the CAs a tenant accepts for agents' client certificates. Adding one lets
agents bind a certificate it issued (assurance high); deleting one first unbinds the agents it
identified, in the same transaction, so they drop to assurance low."""

from __future__ import annotations

import re
from uuid import UUID

import psycopg
from platformkit.ids import uuid7

from strataplane.actions import secret_errors as se
from strataplane.actions.access import tenant_tx
from strataplane.actions.context import Ctx
from strataplane.domain.certificates import HOST_MAPPINGS, anchor_problem
from strataplane.store import fleet_notify, trust_anchors
from strataplane.store.trust_anchors import TrustAnchor

NAME = re.compile(r"[a-z0-9][a-z0-9-]{0,62}")
MAX_URL = 2048


def _check(name: str, ca_pem: str, crl_url: str | None, host_mapping: str) -> None:
    if not NAME.fullmatch(name):
        raise se.InvalidTrustAnchor("1 to 63 characters: a-z, 0-9 and '-'", field="name")
    problem = anchor_problem(ca_pem)
    if problem is not None:
        raise se.InvalidTrustAnchor(problem, field="ca_pem")
    if crl_url is not None and (
        len(crl_url) > MAX_URL or not crl_url.startswith(("http://", "https://"))
    ):
        # a CRL is signed by the anchor: plain HTTP is how distribution points serve it
        raise se.InvalidTrustAnchor("an http(s) URL of at most 2048 characters", field="crl_url")
    if host_mapping not in HOST_MAPPINGS:
        raise se.InvalidTrustAnchor(f"one of {', '.join(HOST_MAPPINGS)}", field="host_mapping")


async def add_trust_anchor(
    ctx: Ctx,
    name: str,
    ca_pem: str,
    *,
    crl_url: str | None = None,
    host_mapping: str = "san-dns",
) -> TrustAnchor:
    _check(name, ca_pem, crl_url, host_mapping)
    async with tenant_tx(ctx) as tx:
        tx.require("tenant.admin")
        try:
            anchor = await trust_anchors.insert_anchor(
                tx.conn, tx.tenant_id, uuid7(), name, ca_pem, crl_url, host_mapping
            )
        except psycopg.errors.UniqueViolation:
            raise se.TrustAnchorNameTaken(field="name") from None
        details = {"name": name, "host_mapping": host_mapping}
        await tx.audit("trust_anchor.add", "trust_anchor", anchor.id, details)
    return anchor


async def list_trust_anchors(ctx: Ctx) -> list[TrustAnchor]:
    async with tenant_tx(ctx) as tx:
        tx.require("spec.read")
        return await trust_anchors.list_anchors(tx.conn, tx.tenant_id)


async def access_trust_anchor(ctx: Ctx, anchor_id: UUID) -> TrustAnchor:
    async with tenant_tx(ctx) as tx:
        tx.require("spec.read")
        found = await trust_anchors.get_anchor(tx.conn, tx.tenant_id, anchor_id)
    if found is None:
        raise se.TrustAnchorNotFound()
    return found


async def revoke_trust_anchor(ctx: Ctx, anchor_id: UUID) -> int:
    """Delete the anchor; the agents it identified are unbound. How many were."""
    async with tenant_tx(ctx) as tx:
        tx.require("tenant.admin")
        anchor = await trust_anchors.get_anchor(tx.conn, tx.tenant_id, anchor_id)
        if anchor is None:
            raise se.TrustAnchorNotFound()
        unbound = await trust_anchors.delete_anchor(tx.conn, tx.tenant_id, anchor_id)
        if unbound:
            await fleet_notify.tenant_changed(tx.conn, tx.tenant_id)
        details = {"name": anchor.name, "agents_unbound": unbound}
        await tx.audit("trust_anchor.revoke", "trust_anchor", anchor_id, details)
    return unbound
