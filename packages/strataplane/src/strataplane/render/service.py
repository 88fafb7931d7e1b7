"""The process's renderer: parsed trees by revision and the render cache."""

from __future__ import annotations

from collections.abc import Mapping
from uuid import UUID

from platformkit.db.scope import Conn

from strataplane.render.artifacts import Artifact
from strataplane.render.cache import RenderCache, RenderResult
from strataplane.render.trees import SpecTree, TreeCache, parse_tree
from strataplane.store import fleet_artifacts, objects

__all__ = ["RENDERER", "Renderer"]


class Renderer:
    def __init__(self) -> None:
        self.trees = TreeCache()
        self.cache = RenderCache()

    async def tree(self, conn: Conn, tenant_id: UUID, revision_id: int) -> SpecTree:
        tree = self.trees.get(tenant_id, revision_id)
        if tree is None:
            tree = parse_tree(await objects.contents_at(conn, tenant_id, revision_id))
            self.trees.put(tenant_id, revision_id, tree)
        return tree

    def render(
        self,
        tenant_id: UUID,
        tree: SpecTree,
        kind: str,
        version: str | None,
        labels: Mapping[str, str],
        agent_url: str,
    ) -> RenderResult:
        return self.cache.render(tenant_id, tree, kind, version, labels, agent_url)

    async def store(
        self, conn: Conn, tenant_id: UUID, arts: Mapping[bytes, tuple[str, Artifact]]
    ) -> None:
        """Insert artifacts (hash -> (agent kind, artifact)) in the caller's transaction; those
        that exist are left as they are."""
        await fleet_artifacts.store_artifacts(conn, tenant_id, list(arts.values()))


RENDERER = Renderer()
