"""Levels ``schema`` and ``sandbox`` of artifact_validation: every rendered Telegraf artifact
is checked against the catalog bundle of each agent version it is meant for (``schema``), then,
when that passes, run through Telegraf's loader and Init checks as the simulated Telegraf
runs them (``sandbox``), once per (artifact, version, level); an artifact that fails either
level for a version never becomes the desired artifact of an agent of that version. A version
without a catalog bundle has no ``schema`` row (validation names it, SP-3008) and a ``sandbox``
row of the Init checks alone."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from uuid import UUID

from platformkit.db.scope import Conn

from strataplane.catalog.service import CATALOG, sandbox_artifact, validate_artifact
from strataplane.render.artifacts import Artifact
from strataplane.store import catalog as store
from strataplane.store.catalog import Validation

__all__ = ["check_artifacts", "failed", "summary"]


async def check_artifacts(
    conn: Conn, tenant_id: UUID, wanted: Mapping[tuple[bytes, str], Artifact]
) -> dict[tuple[bytes, str], list[Validation]]:
    """The validations of (artifact hash, agent version) pairs, ``schema`` first, computing the
    missing ones; the artifacts must be stored. ``sandbox`` is not run on an artifact whose
    ``schema`` failed (the loader would exit on the same finding)."""
    pairs = list(wanted)
    schema = await store.get_validations(conn, tenant_id, pairs, "schema")
    sandbox = await store.get_validations(conn, tenant_id, pairs, "sandbox")
    found: dict[tuple[bytes, str], list[Validation]] = {}
    new = []
    for pair, art in wanted.items():
        digest, version = pair
        results = found[pair] = []
        first = schema.get(pair)
        if first is None or (first.ok and pair not in sandbox):
            bundle = await CATALOG.bundle_for(conn, "telegraf", version)
            if first is None and bundle is not None:
                first = validate_artifact(bundle, digest, art.content, version)
                new.append(first)
            if (first is None or first.ok) and pair not in sandbox:
                sandbox[pair] = sandbox_artifact(bundle, digest, art.content, version)
                new.append(sandbox[pair])
        if first is not None:
            results.append(first)
        if (first is None or first.ok) and pair in sandbox:
            results.append(sandbox[pair])
    await store.put_validations(conn, tenant_id, new)
    return found


def failed(results: Sequence[Validation]) -> Validation | None:
    """The first failed level of an artifact for a version, if any."""
    return next((v for v in results if not v.ok), None)


def summary(v: Validation, limit: int = 3) -> str:
    """The first findings of a failed validation, for diagnostics and sync reasons."""
    parts = []
    for d in v.diagnostics[:limit]:
        line = f" (line {d['line']} of the rendered configuration)" if d.get("line") else ""
        fix = f"; fix: {d['fix']}" if v.level == "sandbox" and d.get("fix") else ""
        parts.append(f"{d['message']}{line}{fix}")
    more = len(v.diagnostics) - limit
    return "; ".join(parts) + (f"; and {more} more" if more > 0 else "")
