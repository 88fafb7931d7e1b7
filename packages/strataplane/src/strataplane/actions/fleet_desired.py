"""Desired state: render agents at their desired revision and record the result.

The desired revision of an agent follows ``fleet_rule``: a pin, else its assignment in the
active rollout, else the release pointer of its kind. Renders go through the process's render
cache, so agents with equal render inputs share one render; each distinct artifact is
inserted once per call. A failed render keeps the previous artifact and sets
``render_error``: a broken render never reaches an agent, and neither does one that fails the
catalog schema of the agent's version (``artifact_checks``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from uuid import UUID

from platformkit.db.scope import Conn

from strataplane.actions.artifact_checks import check_artifacts, failed
from strataplane.actions.fleet_rule import DesiredRule, load_rule
from strataplane.render.artifacts import Artifact
from strataplane.render.cache import supported_version
from strataplane.render.service import RENDERER
from strataplane.store import fleet_notify, fleet_serving
from strataplane.store.fleet_desired import DesiredUpdate, RenderInput, render_inputs, write_desired

__all__ = ["refresh_agents", "render_and_write", "write_by_rule"]


async def render_and_write(
    conn: Conn,
    tenant_id: UUID,
    inputs: Sequence[RenderInput],
    revision_id: int,
    agent_url: str,
    *,
    notify: bool = True,
) -> int:
    """Render ``inputs`` at ``revision_id`` and write their desired state; rows changed.
    ``notify`` False leaves telling the replicas to the caller (one notice per pass).

    The agents' rows are locked first and their inputs read again under the lock: a version
    or label change committed since the caller read ``inputs`` has rendered for itself, and a
    render of the older inputs must not overwrite it."""
    ids = [a.id for a in inputs]
    await fleet_serving.lock_agents(conn, tenant_id, ids)
    inputs = await render_inputs(conn, tenant_id, agent_ids=ids, limit=max(len(ids), 1))
    tree = await RENDERER.tree(conn, tenant_id, revision_id)
    updates: list[DesiredUpdate] = []
    rendered: dict[bytes, tuple[str, Artifact]] = {}
    for agent in inputs:
        if not supported_version(agent.kind, agent.version):
            updates.append(DesiredUpdate(agent.id, revision_id, None, unsupported=True))
            continue
        result = RENDERER.render(
            tenant_id, tree, agent.kind, agent.version, agent.labels, agent_url
        )
        art = result.artifact
        if art is not None:
            rendered.setdefault(art.hash, (agent.kind, art))
        updates.append(DesiredUpdate(agent.id, revision_id, art.hash if art else None))
    await RENDERER.store(conn, tenant_id, rendered)
    updates = await _refuse_invalid(conn, tenant_id, inputs, updates, rendered)
    changed = await write_desired(conn, tenant_id, updates)
    if changed and notify:
        if len(inputs) == 1:
            await fleet_notify.agent_changed(conn, tenant_id, inputs[0].id)
        else:
            await fleet_notify.tenant_changed(conn, tenant_id)
    return changed


async def _refuse_invalid(
    conn: Conn,
    tenant_id: UUID,
    inputs: Sequence[RenderInput],
    updates: list[DesiredUpdate],
    rendered: dict[bytes, tuple[str, Artifact]],
) -> list[DesiredUpdate]:
    """A render that fails the catalog schema or the loader of the agent's version is a failed
    render."""
    # the catalog and the loader stand-in are Telegraf's; other kinds have no such level yet
    versions = {i.id: i.version for i in inputs if i.kind == "telegraf"}
    wanted = {
        (u.artifact, v): rendered[u.artifact][1]
        for u in updates
        if u.artifact is not None and (v := versions.get(u.id)) is not None
    }
    if not wanted:
        return updates
    checked = await check_artifacts(conn, tenant_id, wanted)
    out = []
    for u in updates:
        v = versions.get(u.id)
        results = checked.get((u.artifact, v), []) if u.artifact is not None and v else []
        out.append(replace(u, artifact=None) if failed(results) is not None else u)
    return out


async def write_by_rule(
    conn: Conn,
    tenant_id: UUID,
    inputs: Sequence[RenderInput],
    rule: DesiredRule,
    agent_url: str,
    *,
    notify: bool = True,
) -> int:
    """Render each agent at the revision the rule gives it; rows changed."""
    groups: dict[int, list[RenderInput]] = {}
    for agent in inputs:
        groups.setdefault(rule.revision_for(agent), []).append(agent)
    changed = 0
    for revision, group in sorted(groups.items()):
        changed += await render_and_write(
            conn, tenant_id, group, revision, agent_url, notify=notify
        )
    return changed


async def refresh_agents(
    conn: Conn, tenant_id: UUID, agent_ids: Sequence[UUID], agent_url: str
) -> int:
    """Re-render these agents at their desired revision (after a label, version or pin
    change)."""
    if not agent_ids:
        return 0
    inputs = await render_inputs(conn, tenant_id, agent_ids=agent_ids)
    changed = 0
    for kind in sorted({i.kind for i in inputs}):
        rule = await load_rule(conn, tenant_id, kind)
        if rule is not None:
            group = [i for i in inputs if i.kind == kind]
            changed += await write_by_rule(conn, tenant_id, group, rule, agent_url)
    return changed
