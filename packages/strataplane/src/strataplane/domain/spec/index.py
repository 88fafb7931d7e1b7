"""The index columns of a ``spec_object`` row, derived from its blob at merge
(spec-format.md §1.5). The blob stays the truth; these columns serve queries and CHECKs.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from strataplane.domain.spec.canonical import blob_hash, canonical_bytes
from strataplane.domain.spec.paths import Kind, ObjectId, parse_path
from strataplane.domain.spec.selectors import selector_from_json

__all__ = ["IndexColumns", "index_columns"]


@dataclass(frozen=True, slots=True)
class IndexColumns:
    kind: Kind
    name: str
    path: str
    blob_hash: bytes
    owner_team: str
    agent_kind: str | None
    agent_versions: str | None
    precedence: int | None
    selector: dict[str, object] | None  # the JSON form, {} when absent


def index_columns(path: str, value: Mapping[str, object]) -> IndexColumns:
    """The columns of a validated object; ValueError when ``path`` or a needed field is bad."""
    oid = parse_path(path)
    if not isinstance(oid, ObjectId):
        raise ValueError(oid.message)
    owner = value.get("owner")
    if not isinstance(owner, str):
        raise ValueError(f"{path}: owner is missing")
    agent_kind: str | None = None
    if oid.kind in ("Layer", "Bundle", "Route"):
        raw_kind = value.get("agentKind")
        if not isinstance(raw_kind, str):
            raise ValueError(f"{path}: agentKind is missing")
        agent_kind = raw_kind
    elif oid.kind == "Journey":
        agent_kind = "strataplane-agent"
    layer = oid.kind == "Layer"
    versions = value.get("agentVersions") if layer else None
    precedence = value.get("precedence", 0) if layer else None
    selector = None
    if oid.kind in ("Layer", "Journey"):
        raw = value.get("selector")
        selector = {} if raw is None else selector_from_json(raw).to_json()
    return IndexColumns(
        kind=oid.kind,
        name=oid.name,
        path=path,
        blob_hash=blob_hash(canonical_bytes(value)),
        owner_team=owner,
        agent_kind=agent_kind,
        agent_versions=versions if isinstance(versions, str) else None,
        precedence=precedence if isinstance(precedence, int) else None,
        selector=selector,
    )
