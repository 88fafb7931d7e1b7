"""Level ``schema`` of artifact_validation: every rendered Telegraf artifact is checked against
the catalog bundle of each agent version it is meant for, once per (artifact, version); an
artifact that fails for a version never becomes the desired artifact of an agent of that
version. A version without a catalog bundle is not checked (validation names it, SP-3008)."""

from __future__ import annotations

from collections.abc import Mapping
from uuid import UUID

from platformkit.db.scope import Conn

from strataplane.catalog.service import CATALOG, validate_artifact
from strataplane.render.artifacts import Artifact
from strataplane.store import catalog as store
from strataplane.store.catalog import Validation

__all__ = ["check_artifacts", "summary"]


async def check_artifacts(
    conn: Conn, tenant_id: UUID, wanted: Mapping[tuple[bytes, str], Artifact]
) -> dict[tuple[bytes, str], Validation]:
    """The validations of (artifact hash, agent version) pairs, computing the missing ones;
    the artifacts must be stored. Pairs without a catalog bundle are absent from the result."""
    found = await store.get_validations(conn, tenant_id, list(wanted))
    new = []
    for (digest, version), art in wanted.items():
        if (digest, version) in found:
            continue
        bundle = await CATALOG.bundle_for(conn, "telegraf", version)
        if bundle is None:
            continue
        result = validate_artifact(bundle, digest, art.content, version)
        found[(digest, version)] = result
        new.append(result)
    await store.put_validations(conn, tenant_id, new)
    return found


def summary(v: Validation, limit: int = 3) -> str:
    """The first findings of a failed validation, for diagnostics and sync reasons."""
    parts = []
    for d in v.diagnostics[:limit]:
        line = f" (line {d['line']} of the rendered configuration)" if d.get("line") else ""
        parts.append(f"{d['message']}{line}")
    more = len(v.diagnostics) - limit
    return "; ".join(parts) + (f"; and {more} more" if more > 0 else "")
