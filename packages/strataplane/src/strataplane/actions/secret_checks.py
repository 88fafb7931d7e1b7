"""Per-agent Secret diagnostics of a change set's validation (spec-format.md §5.3): SP-5006
when a referenced Secret's grant excludes the agent, SP-5007 when it requires ``high``
assurance and the agent has ``low``. Reported at the Secret's file, naming the agent and the
fix; only for agents whose artifact changes or whose referenced Secret file changes, so an
unrelated change set is not held by an older problem."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from uuid import UUID

from platformkit.db.scope import Conn

from strataplane.domain.secret_grants import GRANT, policy_of, withheld
from strataplane.domain.spec.diagnostics import Diagnostic
from strataplane.render.trees import SpecTree

__all__ = ["Referrer", "changed_secrets", "secret_diagnostics"]


@dataclass(frozen=True)
class Referrer:
    agent_id: UUID
    kind: str
    labels: Mapping[str, str]
    names: tuple[str, ...]


def _path(name: str) -> str:
    return f"secrets/{name}.toml"


def changed_secrets(base: SpecTree, after: SpecTree) -> frozenset[str]:
    """Names of the Secrets whose file differs between the two trees (added, removed, edited)."""
    paths = {p for p in (*base.objects, *after.objects) if p.startswith("secrets/")}
    return frozenset(
        p.removeprefix("secrets/").removesuffix(".toml")
        for p in paths
        if base.objects.get(p) != after.objects.get(p)
    )


async def _assurance(conn: Conn, tenant_id: UUID, agents: Sequence[UUID]) -> dict[UUID, str]:
    cur = await conn.execute(
        "SELECT id, assurance::text AS assurance FROM agent_instance "
        "WHERE tenant_id = %s AND id = ANY(%s)",
        (tenant_id, list(agents)),
    )
    return {r["id"]: r["assurance"] for r in await cur.fetchall()}


async def secret_diagnostics(
    conn: Conn, tenant_id: UUID, after: SpecTree, referrers: Sequence[Referrer]
) -> list[Diagnostic]:
    if not referrers:
        return []
    levels = await _assurance(conn, tenant_id, [r.agent_id for r in referrers])
    found = []
    for r in referrers:
        for name in r.names:
            table = after.objects.get(_path(name))
            if table is None:
                continue  # SP-4004 reports the reference itself
            level = levels.get(r.agent_id, "low")
            reason = withheld(policy_of(name, table), r.kind, r.labels, level)
            if reason == GRANT:
                msg = (
                    f"agent {r.agent_id} refers to Secret {name!r} but its grant excludes the "
                    "agent; widen the grant or stop referring to it from this agent's Layers"
                )
                found.append(Diagnostic("SP-5006", _path(name), "grant", msg, str(r.agent_id)))
            elif reason is not None:
                msg = (
                    f"agent {r.agent_id} has assurance low and Secret {name!r} requires high: "
                    "it will be withheld until the agent presents a client certificate of a "
                    'trust anchor, or set minAssurance = "low"'
                )
                found.append(
                    Diagnostic("SP-5007", _path(name), "minAssurance", msg, str(r.agent_id))
                )
    return found
