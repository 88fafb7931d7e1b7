"""Importing catalog bundles (platform admins; the shipped ones at start-up) and reading them.

Import verifies the Ed25519 signature over the bundle's SHA-256 against the trusted keys
before it parses anything, so a bundle no trusted key signed is refused unread
(422 catalog.untrusted). The import is a platform audit event.
"""

from __future__ import annotations

import hashlib
import logging
from typing import Any

import zstandard
from platformkit.db.scope import Pool, transaction
from platformkit.ids import uuid7

from strataplane import errors
from strataplane.actions.access import platform_tx, require_platform_admin
from strataplane.actions.context import Ctx, Services, system_ctx
from strataplane.catalog import shipped_bundles, trusted_keys
from strataplane.catalog.service import CATALOG
from strataplane.domain.catalog import BundleError, parse_bundle, verify_signature
from strataplane.settings import Settings
from strataplane.store import catalog as store
from strataplane.store.catalog import BundleRow

__all__ = ["ensure_shipped", "import_bundle", "list_bundles", "plugin_schema"]

log = logging.getLogger("strataplane.catalog")
_MAX_BUNDLE = 64 * 1024 * 1024


def _body(data: bytes) -> bytes:
    if data[:4] == b"\x28\xb5\x2f\xfd":  # zstd frame
        try:
            return zstandard.ZstdDecompressor().decompress(data, max_output_size=_MAX_BUNDLE)
        except zstandard.ZstdError as exc:
            raise errors.CatalogInvalid("the bundle is not a zstd frame") from exc
    return data


async def import_bundle(
    ctx: Ctx, data: bytes, signature: str, *, exists_ok: bool = False
) -> BundleRow | None:
    """Import one bundle (JSON, or zstd-compressed JSON); None when ``exists_ok`` and the same
    bundle is already imported."""
    require_platform_admin(ctx)
    body = _body(data)
    digest = verify_signature(
        body, signature, trusted_keys(ctx.services.settings.catalog_trusted_keys)
    )
    if digest is None:
        raise errors.CatalogUntrusted()
    try:
        bundle = parse_bundle(body)
    except BundleError as exc:
        raise errors.CatalogInvalid(str(exc)) from exc
    contents: dict[str, Any] = {
        "format": 1,
        "source": bundle.source,
        "size": len(body),
        "sha256": digest.hex(),
        "schemas": {s: len(p) for s, p in bundle.plugins.items()},
        "wasm": [],
        "validators": [],
    }
    async with platform_tx(ctx) as tx:
        bundle_id = uuid7()
        created = await store.insert_bundle(
            tx.conn,
            bundle_id,
            agent_kind=bundle.agent_kind,
            version=bundle.version,
            bundle_hash=digest,
            contents=contents,
            plugins=bundle.plugins,
            imported_by=ctx.user_id,
        )
        if not created:
            if exists_ok:
                return None
            raise errors.CatalogExists(f"{bundle.agent_kind} {bundle.version}")
        details = {
            "agent_kind": bundle.agent_kind,
            "version": bundle.version,
            "sha256": digest.hex(),
        }
        await tx.audit("catalog.import", "catalog_bundle", bundle_id, details=details)
        rows = await store.list_bundles(tx.conn, bundle.agent_kind)
    CATALOG.forget()
    return next(r for r in rows if r.id == bundle_id)


async def ensure_shipped(pool: Pool, settings: Settings) -> int:
    """Import the bundles the package ships that are not imported yet; the count imported."""
    async with transaction(pool) as conn:
        have = {r.bundle_hash for r in await store.list_bundles(conn)}
    ctx = system_ctx(Services(pool, settings))
    imported = 0
    for path, sig in shipped_bundles():
        body = _body(path.read_bytes())
        if hashlib.sha256(body).digest() in have:
            continue
        try:
            row = await import_bundle(ctx, body, sig.read_text(), exists_ok=True)
        except errors.StrataplaneError:
            log.exception("shipped catalog bundle %s not imported", path.name)
            continue
        imported += row is not None
    return imported


async def list_bundles(ctx: Ctx, agent_kind: str | None = None) -> list[BundleRow]:
    """Any signed-in principal may read the catalog: it is public facts about agents."""
    async with transaction(ctx.pool) as conn:
        return await store.list_bundles(conn, agent_kind)


async def plugin_schema(
    ctx: Ctx, agent_kind: str, version: str, section: str, plugin: str
) -> dict[str, Any]:
    async with transaction(ctx.pool) as conn:
        found = await store.get_plugin_schema(conn, agent_kind, version, section, plugin)
    if found is None:
        raise errors.CatalogNotFound(f"no {section}.{plugin} in {agent_kind} {version}")
    return found
