"""Explain an agent's configuration: which Layers apply, where every value comes from, what
the render produces now, and how that relates to desired, served and applied.

Artifacts carry no provenance (renders that produce equal bytes share one artifact), so
explain recomputes it from the render inputs: the tree at the agent's desired revision (the
release pointer when none yet), its labels and its version (docs/strataplane/fleet-internals.md).
Every kind is explained alike; an Elastic Agent adds its newest POLICY_CHANGE, its pending
actions and the components it reported (agents/elastic-agent.md).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any
from uuid import UUID

from platformkit.db.scope import Conn

from strataplane.actions.access import tenant_tx
from strataplane.actions.context import Ctx
from strataplane.actions.fleet_inventory import _agent
from strataplane.render.service import RENDERER
from strataplane.store import fleet_desired, fleet_elastic, fleet_hosts, fleet_reports, fleet_spec
from strataplane.store.fleet_elastic import Action


def _hex(value: bytes | None) -> str | None:
    return value.hex() if value is not None else None


def _when(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


def _action(action: Action) -> dict[str, Any]:
    return {
        "id": str(action.id),
        "type": action.type,
        "data": action.data,
        "policy_seq": action.policy_seq,
        "artifact": _hex(action.artifact),
        "created_at": _when(action.created_at),
        "delivered_at": _when(action.delivered_at),
        "acked_at": _when(action.acked_at),
        "ack_error": action.ack_error,
    }


async def _elastic(conn: Conn, tenant_id: UUID, agent_id: UUID) -> dict[str, Any]:
    """What a check-in delivered and heard: the newest policy (its ``policy_seq`` is the
    ``policy_revision_idx`` that proves it), the actions waiting, the units' states."""
    latest = await fleet_elastic.latest_policy(conn, tenant_id, agent_id)
    pending = await fleet_elastic.pending_actions(conn, tenant_id, agent_id)
    units = await fleet_elastic.components(conn, tenant_id, agent_id)
    return {
        "policy": _action(latest) if latest is not None else None,
        "pending_actions": [_action(a) for a in pending],
        "components": [
            {
                "component": c.component_id,
                "unit": c.unit_id or None,
                "type": c.unit_type,
                "state": c.state,
                "message": c.message,
            }
            for c in units
        ],
    }


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
            "facts": agent.facts,
        }
        if agent.kind == "elastic-agent":
            out["elastic"] = await _elastic(tx.conn, tx.tenant_id, agent.id)
        if revision is None:
            return out
        tree = await RENDERER.tree(tx.conn, tx.tenant_id, revision)
        # the URL the server rendered the tenant's desired artifacts with, where it has: the
        # explanation is then the same wherever it is asked (a CLI elsewhere, another replica)
        agent_url = await fleet_desired.rendered_url(tx.conn, tx.tenant_id) or agent_url
    composition = RENDERER.cache.compose(tree, agent.kind, agent.version, host.labels)
    result = RENDERER.render(tx.tenant_id, tree, agent.kind, agent.version, host.labels, agent_url)
    out["render"] = {
        "revision": revision,
        "layers": list(composition.layers),
        "values": composition.explain(),
        "artifact": _hex(result.artifact.hash) if result.artifact else None,
        # what the agent receives: secrets appear as references to the secret store only
        "content": result.artifact.content.decode("utf-8", "replace") if result.artifact else None,
        "secret_refs": list(result.artifact.secret_refs) if result.artifact else [],
        "diagnostics": [d.to_json() for d in result.diagnostics],
    }
    return out


async def agent_history(ctx: Ctx, agent_id: UUID, *, limit: int = 50) -> list[dict[str, Any]]:
    """The agent's latest health and sync transitions, newest first (inventory.read)."""
    async with tenant_tx(ctx) as tx:
        await _agent(tx, agent_id, "inventory.read")
        rows = await fleet_reports.status_events(tx.conn, tx.tenant_id, agent_id, limit)
    return [dict(row) for row in rows]
