"""The fleet's side of change sets: the two calls the spec store makes (documented in
docs/strataplane/fleet-internals.md §2).

- ``change_set_impact(conn, tenant_id, change_set_id, base_revision, result_tree)`` during
  validation: renders every agent at the base revision and at the resulting tree, stores the
  impact set (change_set_impact rows) and returns the summary for ``change_set.impact`` and
  the per-agent diagnostics (SP-5001, SP-5009, SP-5010) for ``change_set.validation``.
- ``change_set_merged(conn, tenant_id, change_set_id, revision_id, set_by)`` in the merge
  transaction: deletes the impact rows and starts a rollout of every agent kind to the new
  revision (actions/rollouts.py); the NOTIFY it sends is delivered at commit and wakes the
  controllers, which start its first stage. ``change_set_closed`` deletes the impact rows.

Both run in the caller's tenant transaction and write nothing outside it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol
from uuid import UUID

from platformkit.db.scope import Conn

from strataplane.actions.artifact_checks import check_artifacts, failed, summary
from strataplane.actions.rollouts import begin_rollout
from strataplane.actions.secret_checks import Referrer, changed_secrets, secret_diagnostics
from strataplane.domain.spec.diagnostics import Diagnostic
from strataplane.render.artifacts import Artifact
from strataplane.render.cache import RENDERED_KINDS, supported_version
from strataplane.render.service import RENDERER
from strataplane.render.trees import parse_tree
from strataplane.store import fleet_artifacts, fleet_notify, fleet_spec
from strataplane.store.fleet_desired import render_inputs
from strataplane.store.rollouts import Rollout

__all__ = [
    "FleetHooks",
    "Impact",
    "change_set_closed",
    "change_set_impact",
    "change_set_merged",
    "move_release",
]

KINDS = RENDERED_KINDS


@dataclass
class Impact:
    summary: dict[str, Any]
    diagnostics: list[Diagnostic] = field(default_factory=list)


class FleetHooks(Protocol):
    """What the spec store calls; this module is the implementation."""

    async def change_set_impact(
        self,
        conn: Conn,
        tenant_id: UUID,
        change_set_id: UUID,
        base_revision: int,
        result_tree: Mapping[str, bytes],
        *,
        agent_url: str,
    ) -> Impact: ...

    async def change_set_merged(
        self,
        conn: Conn,
        tenant_id: UUID,
        change_set_id: UUID,
        revision_id: int,
        set_by: UUID | None,
    ) -> list[Rollout]: ...

    async def change_set_closed(self, conn: Conn, tenant_id: UUID, change_set_id: UUID) -> None: ...


async def change_set_impact(
    conn: Conn,
    tenant_id: UUID,
    change_set_id: UUID,
    base_revision: int,
    result_tree: Mapping[str, bytes],
    *,
    agent_url: str,
) -> Impact:
    base = await RENDERER.tree(conn, tenant_id, base_revision)
    after_tree = parse_tree(result_tree)
    rows: list[tuple[UUID, bytes | None, bytes | None]] = []
    rendered: dict[bytes, tuple[str, Artifact]] = {}
    targets: dict[tuple[bytes, str], list[UUID]] = {}  # new artifact, agent version -> agents
    impact = Impact(
        {
            "agents": 0,
            "renderFailed": 0,
            "byKind": {},
            "byOwner": {},
            "byStage": {},
            "byVersion": {},
        }
    )
    after_id: UUID | None = None
    secrets_changed = changed_secrets(base, after_tree)
    referrers: list[Referrer] = []
    while True:
        batch = await render_inputs(conn, tenant_id, after=after_id, limit=5000)
        if not batch:
            break
        after_id = batch[-1].id
        for agent in batch:
            if agent.kind not in KINDS:
                continue
            args = (agent.kind, agent.version, agent.labels, agent_url)
            before = RENDERER.render(tenant_id, base, *args)
            after = RENDERER.render(tenant_id, after_tree, *args)
            old = before.artifact.hash if before.artifact else None
            new = after.artifact.hash if after.artifact else None
            refs = after.artifact.secret_refs if after.artifact else ()
            if refs and (old != new or secrets_changed.intersection(refs)):
                referrers.append(Referrer(agent.id, agent.kind, agent.labels, refs))
            if old == new and after.artifact is not None:
                continue
            for result in (before, after):
                if result.artifact is not None:
                    rendered.setdefault(result.artifact.hash, (agent.kind, result.artifact))
            rows.append((agent.id, old, new))
            if new is not None and agent.version is not None and agent.kind == "telegraf":
                targets.setdefault((new, agent.version), []).append(agent.id)
            _count(impact, agent.kind, agent.version, agent.labels)
            if not supported_version(agent.kind, agent.version):
                msg = f"agent {agent.id} has an unsupported version and receives no config"
                impact.diagnostics.append(Diagnostic("SP-5009", None, None, msg, str(agent.id)))
            if new is None:
                impact.summary["renderFailed"] += 1
                detail = "; ".join(f"{d.code} {d.message}" for d in after.diagnostics)
                impact.diagnostics.append(
                    Diagnostic("SP-5001", None, None, f"render failed: {detail}", str(agent.id))
                )
    await RENDERER.store(conn, tenant_id, rendered)
    impact.diagnostics += await secret_diagnostics(conn, tenant_id, after_tree, referrers)
    impact.diagnostics += await _artifact_levels(conn, tenant_id, targets, rendered)
    await fleet_artifacts.replace_impact(conn, tenant_id, change_set_id, rows)
    if not rows:
        msg = "the change set changes no agent's configuration"
        impact.diagnostics.append(Diagnostic("SP-5010", None, None, msg))
    return impact


async def _artifact_levels(
    conn: Conn,
    tenant_id: UUID,
    targets: Mapping[tuple[bytes, str], list[UUID]],
    rendered: Mapping[bytes, tuple[str, Artifact]],
) -> list[Diagnostic]:
    """SP-5004 per (new artifact, agent version) that fails that version's catalog schema,
    SP-5005 per one that Telegraf's loader (level ``sandbox``) refuses."""
    wanted = {pair: rendered[pair[0]][1] for pair in targets}
    checked = await check_artifacts(conn, tenant_id, wanted)
    found = []
    for (digest, version), agents in sorted(targets.items()):
        result = failed(checked.get((digest, version), []))
        if result is None:
            continue
        msg = (
            f"{result.validator}: {summary(result)}; {len(agents)} agent(s) of version "
            f"{version} would receive it (they keep their current configuration)"
        )
        code = "SP-5004" if result.level == "schema" else "SP-5005"
        found.append(Diagnostic(code, None, None, msg, str(agents[0]), digest.hex()))
    return found


def _count(impact: Impact, kind: str, version: str | None, labels: Mapping[str, str]) -> None:
    s = impact.summary
    s["agents"] += 1
    for name, key in (
        ("byKind", kind),
        ("byOwner", labels.get("owner", "")),
        ("byStage", "all"),
        ("byVersion", f"{kind} {version}"),
    ):
        s[name][key] = s[name].get(key, 0) + 1


async def change_set_merged(
    conn: Conn, tenant_id: UUID, change_set_id: UUID, revision_id: int, set_by: UUID | None
) -> list[Rollout]:
    """Drop the impact rows and start a rollout of each agent kind to the new revision, staged
    by the tenant's RolloutPolicy (409 rollout.active while one of the kind is active). A kind
    none of whose agents the change set impacts has nothing to stage: its pointer moves."""
    started = []
    for kind in KINDS:
        impacted = await fleet_artifacts.impact_count(conn, tenant_id, change_set_id, kind)
        rollout = await begin_rollout(
            conn, tenant_id, kind, revision_id, set_by, staged=impacted > 0
        )
        if rollout is not None:
            started.append(rollout)
    await fleet_artifacts.delete_impact(conn, tenant_id, change_set_id)
    return started


async def move_release(conn: Conn, tenant_id: UUID, revision_id: int, set_by: UUID | None) -> None:
    """Point every agent kind's release at ``revision_id`` at once, without a rollout: what
    ``simulate/seed.publish`` does for tests and benchmarks."""
    moved = False
    for kind in KINDS:
        moved = await fleet_spec.set_release(conn, tenant_id, kind, revision_id, set_by) or moved
    if moved:
        await fleet_notify.release_moved(conn, tenant_id)


async def change_set_closed(conn: Conn, tenant_id: UUID, change_set_id: UUID) -> None:
    await fleet_artifacts.delete_impact(conn, tenant_id, change_set_id)
