"""The Elastic Agent renderer: a composed configuration tree (spec-format.md §4.6) into the
policy JSON a POLICY_CHANGE action carries (docs/strataplane/agents/elastic-agent.md §3).

``agent`` settings are copied, ``outputs.<name>`` become the policy's ``outputs`` map and
``inputs.<id>`` its ``inputs`` list, each with that ``id``, in id order. Every input must name
an output of the merged tree in ``use_output`` (SP-5008). The bytes are sorted, compact JSON,
so equal trees give equal bytes; the policy id and revision are added when the action is
delivered, not stored in the artifact, so agents that render the same share it.

``secret://NAME`` becomes ``$co.elastic.secret{NAME}`` (the inline reference form Fleet Server
replaces) and NAME is recorded in the artifact's ``secret_refs``; the value is put in only when
a POLICY_CHANGE is delivered to an agent the Secret admits (agents/elastic_secrets.py).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field

from strataplane.domain.spec.agentconfig import parse_reference
from strataplane.domain.spec.diagnostics import Diagnostic

__all__ = ["ElasticRender", "render_elastic"]


SECRET_PREFIX = "$co.elastic.secret{"  # noqa: S105 - the reference's form, not a secret


def secret_reference(name: str) -> str:
    return f"{SECRET_PREFIX}{name}}}"


@dataclass
class ElasticRender:
    content: bytes | None
    diagnostics: list[Diagnostic] = field(default_factory=list)
    secret_names: list[str] = field(default_factory=list)


def _references(value: object, names: list[str]) -> object:
    if isinstance(value, Mapping):
        return {k: _references(v, names) for k, v in value.items()}
    if isinstance(value, list):
        return [_references(v, names) for v in value]
    ref = parse_reference(value) if isinstance(value, str) else None
    if ref is None or ref[0] != "secret" or ref[1] is None:
        return value
    names.append(ref[1])
    return secret_reference(ref[1])


def render_elastic(config: Mapping[str, object]) -> ElasticRender:
    """The policy of one composition; ``content`` None with diagnostics when it cannot run."""
    result = ElasticRender(None)
    names: list[str] = []
    referenced = _references(config, names)
    assert isinstance(referenced, Mapping)
    config = referenced
    outputs = config.get("outputs")
    outputs = dict(outputs) if isinstance(outputs, Mapping) else {}
    inputs = config.get("inputs")
    listed = []
    for input_id, options in sorted((inputs or {}).items() if isinstance(inputs, Mapping) else []):
        if not isinstance(options, Mapping):
            continue
        use = options.get("use_output")
        if use not in outputs:
            msg = f"input {input_id!r} uses output {use!r}, which the merged tree does not have"
            result.diagnostics.append(Diagnostic("SP-5008", None, f"config.inputs.{input_id}", msg))
        listed.append({**options, "id": input_id})
    if not listed:
        msg = "no input applies to this agent; its policy would run nothing"
        result.diagnostics.append(Diagnostic("SP-5001", None, "config.inputs", msg))
    if result.diagnostics:
        return result
    policy: dict[str, object] = {"outputs": outputs, "inputs": listed}
    agent = config.get("agent")
    if isinstance(agent, Mapping):
        policy["agent"] = dict(agent)
    content = json.dumps(policy, sort_keys=True, separators=(",", ":")).encode()
    if content.count(SECRET_PREFIX.encode()) != len(names):
        # a literal reference would be replaced with a value where the spec put none
        msg = f"the configuration contains the renderer's secret reference {SECRET_PREFIX!r}"
        result.diagnostics.append(Diagnostic("SP-5001", None, None, msg))
        return result
    result.content = content
    result.secret_names = sorted(set(names))
    return result
