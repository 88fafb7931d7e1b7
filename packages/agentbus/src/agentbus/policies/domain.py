"""Pure rules of policies: validating Cedar text against the schema, compiling a tenant's
policies into one pre-parsed set whose Cedar ids name the policy rows, and deciding one
request. No I/O; the engine (``gateway/actions/policy.py``) caches what ``compile_set`` builds.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import cedarpy

from agentbus.ids import format_id
from agentbus.policies.model import DEFAULT_CEDAR, SCHEMA

Row = Mapping[str, Any]
CEDAR_MAX = 64 * 1024
"""The longest policy text accepted (characters)."""
_SCHEMA = cedarpy.Schema.from_str(SCHEMA)
_DEFAULT_TEXT = DEFAULT_CEDAR


class PolicyInvalid(ValueError):
    """Cedar text that does not parse or fails validation against the schema; ``errors`` says
    where."""

    def __init__(self, errors: Sequence[str]) -> None:
        super().__init__("; ".join(errors))
        self.errors = list(errors)


CEDAR_NESTING_MAX = 32
"""The deepest nesting of brackets a policy may have."""
CEDAR_OPERATORS_MAX = 250
"""The most operators (``&&``, ``.``, ``==``, ``if`` ...) one policy may hold."""
_LITERALS = re.compile(r'"(?:[^"\\]|\\.)*"?|//[^\n]*')
_OPERATORS = re.compile(r"&&|\|\||[=!<>]=?|[-+*.]|\b(?:if|then|else|in|has|like|is)\b")


def _shape_problem(text: str) -> str | None:
    """Why the text is too deep or too long a chain for the parser, or None. The Cedar
    parser recurses on the expression tree, and a few hundred nested brackets or some tens of
    thousands of chained operators overflow the thread's stack, which ends the process; so the
    shape is measured here, outside string literals and comments, before it sees the text."""
    code = _LITERALS.sub(" ", text)
    depth = deepest = 0
    for char in code:
        if char in "([{":
            depth += 1
            deepest = max(deepest, depth)
        elif char in ")]}":
            depth -= 1
    if deepest > CEDAR_NESTING_MAX:
        return f"brackets nest deeper than {CEDAR_NESTING_MAX} levels"
    for statement in code.split(";"):
        if len(_OPERATORS.findall(statement)) > CEDAR_OPERATORS_MAX:
            return f"a policy holds more than {CEDAR_OPERATORS_MAX} operators"
    return None


def validate(text: str) -> None:
    """PolicyInvalid unless ``text`` parses, holds at least one policy, no templates, and
    validates against the schema."""
    if len(text) > CEDAR_MAX:
        raise PolicyInvalid([f"the policy text is longer than {CEDAR_MAX} characters"])
    problem = _shape_problem(text)
    if problem is not None:
        raise PolicyInvalid([problem])
    try:
        parsed = json.loads(cedarpy.policies_to_json_str(text))
    except Exception as exc:  # the parser's errors are ValueError; anything else refuses too
        raise PolicyInvalid([f"does not parse: {exc}"]) from None
    if parsed.get("templates"):
        raise PolicyInvalid(["templates (?principal, ?resource) are not supported"])
    if not parsed.get("staticPolicies"):
        raise PolicyInvalid(["the text holds no policy"])
    result = cedarpy.validate_policies(text, _SCHEMA)
    if not result.validation_passed:
        raise PolicyInvalid([str(error.error) for error in result.errors])


def in_force(rows: Iterable[Row]) -> list[Row]:
    """The newest version of each policy (by workspace and name), if enabled: what runs."""
    newest: dict[tuple[Any, str], Row] = {}
    for row in rows:
        key = (row["workspace_id"], row["name"])
        if key not in newest or row["version"] > newest[key]["version"]:
            newest[key] = row
    return sorted((r for r in newest.values() if r["enabled"]), key=lambda r: str(r["id"]))


@dataclass(frozen=True)
class Compiled:
    """A pre-parsed policy set. ``names`` maps each Cedar policy id to its row's id and name;
    ``allows_all``: the set is the default alone, so every request is allowed without asking
    Cedar."""

    policies: cedarpy.PolicySet | None
    names: dict[str, tuple[uuid.UUID | None, str]] = field(default_factory=dict)
    allows_all: bool = False
    default_id: uuid.UUID | None = None


def compile_set(rows: Sequence[Row]) -> Compiled:
    """One set of the given (in force) rows; ValueError if one no longer parses."""
    if len(rows) == 1 and rows[0]["cedar"].strip() == _DEFAULT_TEXT.strip():
        return Compiled(None, allows_all=True, default_id=rows[0]["id"])
    statics: dict[str, Any] = {}
    names: dict[str, tuple[uuid.UUID | None, str]] = {}
    for i, row in enumerate(rows):
        parsed = json.loads(cedarpy.policies_to_json_str(row["cedar"]))
        for n, policy in enumerate(parsed.get("staticPolicies", {}).values()):
            cedar_id = f"p{i}.{n}"
            statics[cedar_id] = policy
            names[cedar_id] = (row["id"], row["name"])
    document = {"staticPolicies": statics, "templates": {}, "templateLinks": []}
    return Compiled(cedarpy.PolicySet.from_json_str(json.dumps(document)), names)


@dataclass(frozen=True)
class Decision:
    allowed: bool
    policy_id: uuid.UUID | None = None
    policy_name: str | None = None
    reason: str | None = None


@dataclass(frozen=True)
class Request:
    """One question: may ``principal`` (an agent row) do ``action`` to ``resource`` with this
    message at ``at``."""

    action: str
    principal: Row
    resource: Row
    type: str
    capability: str | None
    size_bytes: int
    attachments: int
    attachment_bytes: int
    priority: str
    at: datetime


def _workspace_slug(address: str) -> str:
    parts = address.removeprefix("agent://").split("/")
    return parts[1] if len(parts) == 3 else ""


def _capabilities(value: Any) -> list[str]:
    if not isinstance(value, list):
        return []
    return sorted({c["name"] for c in value if isinstance(c, dict) and "name" in c})


def entities(request: Request) -> list[dict[str, Any]]:
    """The two agents and their workspaces, as Cedar entities."""
    out: dict[str, dict[str, Any]] = {}
    for agent in (request.principal, request.resource):
        ws = format_id("ws", agent["workspace_id"])
        slug = _workspace_slug(agent["address"])
        out[ws] = {"uid": {"type": "AgentBus::Workspace", "id": ws}, "attrs": {"slug": slug},
                   "parents": []}  # fmt: skip
        out[format_id("agt", agent["id"])] = {
            "uid": {"type": "AgentBus::Agent", "id": format_id("agt", agent["id"])},
            "attrs": {
                "address": agent["address"],
                "name": agent["name"],
                "workspace": slug,
                "owner": format_id("usr", agent["owner_user_id"]),
                "harness": agent["harness"],
                "capabilities": _capabilities(agent["capabilities"]),
            },
            "parents": [{"type": "AgentBus::Workspace", "id": ws}],
        }
    return list(out.values())


def cedar_request(request: Request) -> dict[str, Any]:
    at = request.at
    return {
        "principal": {"type": "AgentBus::Agent", "id": format_id("agt", request.principal["id"])},
        "action": {"type": "AgentBus::Action", "id": request.action},
        "resource": {"type": "AgentBus::Agent", "id": format_id("agt", request.resource["id"])},
        "context": {
            "type": request.type,
            "capability": request.capability or "",
            "size_bytes": request.size_bytes,
            "attachments": request.attachments,
            "attachment_bytes": request.attachment_bytes,
            "priority": request.priority,
            "hour": at.hour,
            "weekday": at.isoweekday(),
            "now": int(at.timestamp()),
        },
    }


def parsed_entities(request: Request) -> cedarpy.Entities:
    """``entities`` parsed by Cedar once, for a caller that keeps them (parsing is half of a
    decision's cost)."""
    return cedarpy.Entities.from_json_str(json.dumps(entities(request)))


def decide(
    compiled: Compiled, request: Request, parsed: cedarpy.Entities | None = None
) -> Decision:
    """Cedar's answer, naming the policy that decided: the first forbid that applied, or for
    an allow the first permit; a deny with no policy named means none permitted it.
    ``parsed``: the request's entities from ``parsed_entities``, if the caller kept them."""
    if compiled.allows_all:
        return Decision(True, compiled.default_id, "default")
    if compiled.policies is None:  # no policy in force: Cedar denies by default
        return Decision(False, reason="no enabled policy permits it")
    # The entities are built here from rows and match the schema by construction; validating
    # them again on every request would double the decision's cost.
    known = parsed if parsed is not None else entities(request)
    result = cedarpy.is_authorized(cedar_request(request), compiled.policies, known)
    reasons = sorted(result.diagnostics.reasons)
    named = [compiled.names[r] for r in reasons if r in compiled.names]
    if result.allowed:
        pid, name = named[0] if named else (None, None)
        return Decision(True, pid, name)
    if named:
        pid, name = named[0]
        return Decision(False, pid, name, f"forbidden by policy {name!r}")
    return Decision(False, reason="no enabled policy permits it")
