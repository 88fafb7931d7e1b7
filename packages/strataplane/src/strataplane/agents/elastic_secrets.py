"""Secrets in the policies of Elastic Agents, put in as Fleet Server does
(internal/pkg/api/handleCheckin.go ``processPolicy``, internal/pkg/secret): the stored policy
holds ``$co.elastic.secret{NAME}`` references (render/elastic.py); when a check-in delivers a
POLICY_CHANGE, each reference is replaced with the current value, and the policy's
``secret_paths`` lists the keys that now hold one (Elastic Agent redacts them in its
diagnostics). Values go only to an agent the Secrets' grant and minAssurance admit at that
request; one secret_delivery row per value per POLICY_CHANGE delivered (channel
``elastic-policy``).

If a referenced Secret is withheld from the agent, or has no value, the policy is not delivered:
the check-in answers 403 ``secret.withheld`` (Elastic Agent backs off and checks in again; only
401s count towards its self-unenrolment) and the action stays pending, so it is delivered once
the agent is admitted (a new certificate, a changed grant) or the value exists.
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any

from platformkit.db.scope import tenant_transaction

from strataplane.actions import secret_errors as se
from strataplane.agents.front import AgentRequest
from strataplane.agents.telegraf_secrets import deliver
from strataplane.db import SCOPE
from strataplane.render.elastic import SECRET_PREFIX
from strataplane.store import fleet_elastic

if TYPE_CHECKING:
    from strataplane.agents.auth import AgentIdentity
    from strataplane.agents.runtime import FleetRuntime
    from strataplane.store.fleet_elastic import Action

CHANNEL = "elastic-policy"
_PREFIX = SECRET_PREFIX.encode()
_REFERENCE = re.compile(r"\$co\.elastic\.secret\{([A-Za-z0-9_]{1,128})\}")


def has_references(policy: bytes) -> bool:
    return _PREFIX in policy


def fill(value: Any, values: dict[str, str], path: str, paths: list[str]) -> Any:
    """``value`` with every reference replaced; the dotted path of each replaced key is added
    to ``paths`` (``inputs.0.password``, ``outputs.default.api_key``), as Fleet Server names
    them."""
    if isinstance(value, dict):
        return {k: fill(v, values, f"{path}.{k}" if path else k, paths) for k, v in value.items()}
    if isinstance(value, list):
        return [fill(v, values, f"{path}.{i}", paths) for i, v in enumerate(value)]
    if isinstance(value, str) and _REFERENCE.search(value):
        paths.append(path)
        return _REFERENCE.sub(lambda m: values[m.group(1)], value)
    return value


async def with_secrets(
    rt: FleetRuntime, req: AgentRequest, who: AgentIdentity, pending: list[Action], policy: bytes
) -> bytes:
    """The policy with its values, for this agent; 403 (and the actions left pending) when
    one is withheld."""
    serving = await rt.states.get(who)
    if serving is not None and serving.quarantined:
        await _undeliver(rt, who, pending)
        raise se.AgentQuarantined()
    body = json.loads(policy)
    names = {m.group(1) for m in _REFERENCE.finditer(policy.decode())}
    found = await deliver(rt, rt.app_state, req, who, CHANNEL, names)
    if found.refused:
        await _undeliver(rt, who, pending)
        raise se.SecretWithheld(f"withheld: {', '.join(sorted(found.refused))}")
    paths: list[str] = []
    filled = fill(body, found.values, "", paths)
    filled["secret_paths"] = sorted(paths)
    return json.dumps(filled, sort_keys=True, separators=(",", ":")).encode()


async def _undeliver(rt: FleetRuntime, who: AgentIdentity, pending: list[Action]) -> None:
    async with tenant_transaction(rt.pool, SCOPE, who.tenant_id) as conn:
        await fleet_elastic.mark_pending(conn, who.tenant_id, [p.id for p in pending])
