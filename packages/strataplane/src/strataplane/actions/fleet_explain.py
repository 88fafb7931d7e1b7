"""Explain an agent's configuration: which Layers apply, where every value comes from, what
the render produces now, and how that relates to desired, served and applied.

Artifacts carry no provenance (renders that produce equal bytes share one artifact), so
explain recomputes it from the render inputs: the tree at the agent's desired revision (the
release pointer when none yet), its labels and its version (docs/strataplane/fleet-internals.md).
"""

from __future__ import annotations

from typing import Any
from uuid import UUID

from strataplane.actions.access import tenant_tx
from strataplane.actions.context import Ctx
from strataplane.actions.fleet_inventory import _agent
from strataplane.render.service import RENDERER
from strataplane.store import fleet_hosts, fleet_spec


def _hex(value: bytes | None) -> str | None:
    return value.hex() if value is not None else None


async def explain_agent(ctx: Ctx, agent_id: UUID, *, agent_url: str) -> dict[str, Any]:
    async with tenant_tx(ctx) as tx:
        agent = await _agent(tx, agent_id, "inventory.read")
        host = await fleet_hosts.get_host(tx.conn, tx.tenant_id, agent.host_id)
        assert host is not None
        release = await fleet_spec.release_revision(tx.conn, tx.tenant_id, agent.kind)
        revision = agent.desired_revision_id or release
        out: dict[str, Any] = {
            "agent": {
                "id": str(agent.id),
                "kind": agent.kind,
                "external_id": agent.external_id,
                "version": agent.version,
                "host": host.name,
            },
            "labels": host.labels,
            "release_revision": release,
            "desired": {
                "revision": agent.desired_revision_id,
                "artifact": _hex(agent.desired_artifact),
                "since": agent.desired_since.isoformat() if agent.desired_since else None,
            },
            "served": {
                "artifact": _hex(agent.served_artifact),
                "at": agent.served_at.isoformat() if agent.served_at else None,
            },
            "applied": {
                "artifact": _hex(agent.applied_artifact),
                "revision": agent.applied_revision_id,
            },
            "health": agent.health,
            "sync": agent.sync,
            "sync_reason": agent.sync_reason,
            "flags": agent.flags,
        }
        if revision is None:
            return out
        tree = await RENDERER.tree(tx.conn, tx.tenant_id, revision)
    composition = RENDERER.cache.compose(tree, agent.kind, agent.version, host.labels)
    result = RENDERER.render(tx.tenant_id, tree, agent.kind, agent.version, host.labels, agent_url)
    out["render"] = {
        "revision": revision,
        "layers": list(composition.layers),
        "values": composition.explain(),
        "artifact": _hex(result.artifact.hash) if result.artifact else None,
        "diagnostics": [d.to_json() for d in result.diagnostics],
    }
    return out
