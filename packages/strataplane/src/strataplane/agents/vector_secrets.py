"""Secrets in the configuration Vector's ``http`` provider loads (docs/strataplane/agents/
vector.md §3, decisions/0055).

The stored artifact holds ``"SECRET[strataplane.NAME]"`` where the spec said ``secret://NAME``
(render/vector.py); serving it, the config endpoint replaces each reference with the current
value as a TOML string, for an agent the Secret's grant and minAssurance admit at this request
(assurance high needs the client certificate bound to the agent: the provider's ``tls``
options present it). If any referenced Secret is withheld, or has no value, the configuration
is not served (403 ``secret.withheld``): Vector does not look at the status, fails to load the
problem body and keeps the configuration it runs.

The bootstrap file sets ``interpolate_env``, so Vector expands ``$NAME`` and ``${NAME}`` in
the served text and turns ``$$`` into ``$``: every ``$`` of a value is sent as ``$$``.
Deliveries are recorded on channel ``vector-config`` when a version first reaches the agent,
not on every poll.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from starlette.datastructures import State

from strataplane.actions import secret_errors as se
from strataplane.agents.front import AgentRequest
from strataplane.agents.telegraf_secrets import deliver
from strataplane.render.vector import SECRET_PREFIX

if TYPE_CHECKING:
    from strataplane.agents.auth import AgentIdentity
    from strataplane.agents.runtime import FleetRuntime
    from strataplane.store.fleet_serving import ServingState

CHANNEL = "vector-config"
_PREFIX = SECRET_PREFIX.encode()
_REFERENCE = re.compile(rb'"SECRET\[strataplane\.([A-Za-z0-9_]{1,128})\]"')
_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f"}
_ESCAPES |= {"\r": "\\r", "$": "$$"}


def has_references(body: bytes) -> bool:
    return _PREFIX in body


def toml_string(value: str) -> str:
    """``value`` as a TOML basic string that Vector's variable expansion leaves as it is."""
    out = []
    for ch in value:
        escaped = _ESCAPES.get(ch)
        if escaped is not None:
            out.append(escaped)
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\u{ord(ch):04X}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def fill(body: bytes, values: dict[str, str]) -> bytes:
    return _REFERENCE.sub(lambda m: toml_string(values[m.group(1).decode()]).encode(), body)


async def with_secrets(
    rt: FleetRuntime,
    state: State,
    req: AgentRequest,
    who: AgentIdentity,
    serving: ServingState,
    body: bytes,
) -> bytes:
    """``body`` with its references replaced by the values this agent may receive."""
    if serving.quarantined:
        raise se.AgentQuarantined()
    names = {m.group(1).decode() for m in _REFERENCE.finditer(body)}
    found = await deliver(rt, state, req, who, CHANNEL, names, record_all=False)
    if found.refused:
        raise se.SecretWithheld(f"withheld: {', '.join(sorted(found.refused))}")
    return fill(body, found.values)
