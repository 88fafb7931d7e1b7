"""The process's view of the imported catalog: which bundle an agent version uses (the list
of versions is re-read every few seconds, so an import reaches every replica) and each bundle's
schemas (immutable, read once). Levels ``schema`` and ``sandbox`` of artifact_validation are
computed here."""

from __future__ import annotations

import time
import tomllib
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

from platformkit.db.scope import Conn

from strataplane.domain.catalog import Bundle, check_telegraf, pick_bundle, plugin_line
from strataplane.domain.telegraf_loader import loader_refusal
from strataplane.store import catalog as store
from strataplane.store.catalog import Validation

__all__ = ["CATALOG", "Catalog", "sandbox_artifact", "validate_artifact"]

_VERSIONS_TTL = 5.0


@dataclass
class Catalog:
    _versions: dict[str, tuple[float, dict[str, tuple[UUID, bytes, str]]]] = field(
        default_factory=dict
    )
    _bundles: dict[UUID, Bundle] = field(default_factory=dict)

    def forget(self) -> None:
        self._versions.clear()

    async def versions(self, conn: Conn, kind: str) -> dict[str, tuple[UUID, bytes, str]]:
        cached = self._versions.get(kind)
        if cached is not None and time.monotonic() - cached[0] < _VERSIONS_TTL:
            return cached[1]
        rows = await store.list_bundles(conn, kind)
        found = {r.version: (r.id, r.bundle_hash, str(r.contents.get("source", ""))) for r in rows}
        self._versions[kind] = (time.monotonic(), found)
        return found

    async def bundle_for(self, conn: Conn, kind: str, version: str | None) -> Bundle | None:
        versions = await self.versions(conn, kind)
        chosen = pick_bundle(list(versions), version)
        if chosen is None:
            return None
        bundle_id, digest, source = versions[chosen]
        bundle = self._bundles.get(bundle_id)
        if bundle is None:
            plugins = await store.plugin_schemas(conn, bundle_id)
            bundle = self._bundles[bundle_id] = Bundle(kind, chosen, digest, source, plugins)
        return bundle

    async def all_bundles(self, conn: Conn, kind: str) -> list[Bundle]:
        out = []
        for version in await self.versions(conn, kind):
            bundle = await self.bundle_for(conn, kind, version)
            if bundle is not None:
                out.append(bundle)
        return out


CATALOG = Catalog()


def validate_artifact(
    bundle: Bundle, artifact_hash: bytes, content: bytes, agent_version: str
) -> Validation:
    """Level ``schema`` of one rendered Telegraf artifact for one agent version."""
    text = content.decode()
    config: dict[str, Any] = tomllib.loads(text)
    diagnostics = []
    for f in check_telegraf(bundle, config):
        diagnostics.append(
            {
                "section": f.section,
                "plugin": f.plugin,
                "instance": f.alias,
                "option": f.option,
                "line": plugin_line(text, f),
                "message": f.text(),
                "fix": f.fix,
            }
        )
    return Validation(
        artifact_hash, agent_version, "schema", not diagnostics, diagnostics, bundle.validator
    )


def sandbox_validator(bundle: Bundle | None, agent_version: str) -> str:
    facts = f"catalog {bundle.version}" if bundle is not None else "no catalog bundle"
    return f"telegraf {agent_version} loader stand-in ({facts})"


def sandbox_artifact(
    bundle: Bundle | None, artifact_hash: bytes, content: bytes, agent_version: str
) -> Validation:
    """Level ``sandbox`` of one rendered Telegraf artifact for one agent version: Telegraf's
    loader and its plugins' Init checks, as the simulated Telegraf runs them (the Telegraf
    binary is not available to the server; decisions/0033)."""
    text = content.decode()
    refusal = loader_refusal(bundle, tomllib.loads(text), agent_version)
    diagnostics = []
    if refusal is not None:
        finding = refusal.finding()
        diagnostics.append(
            {
                "section": refusal.section,
                "plugin": refusal.plugin,
                "instance": refusal.alias,
                "option": refusal.option,
                "line": plugin_line(text, finding),
                "message": refusal.message,
                "fix": refusal.fix,
            }
        )
    validator = sandbox_validator(bundle, agent_version)
    return Validation(
        artifact_hash, agent_version, "sandbox", not diagnostics, diagnostics, validator
    )
