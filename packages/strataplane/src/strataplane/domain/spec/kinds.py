"""The field schema of every kind (spec-format.md §1.3, §3): ``check_object`` checks one parsed
file against its kind and returns the ``Facts`` the cross-file checks use.

The checks of each kind are in ``kinds_agent`` (Layer, Bundle, Route, Journey) and
``kinds_policy`` (Secret, ApprovalPolicy, RolloutPolicy, Settings, Placement); this module
adds the fields every kind has and dispatches.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import partial

from strataplane.domain.spec.diagnostics import Collector
from strataplane.domain.spec.fields import TEAM_SLUG, Fields
from strataplane.domain.spec.kinds_agent import (
    check_bundle,
    check_journey,
    check_layer,
    check_route,
)
from strataplane.domain.spec.kinds_policy import (
    check_approval_policy,
    check_placement,
    check_rollout_policy,
    check_secret,
    check_settings,
)
from strataplane.domain.spec.objects import Facts
from strataplane.domain.spec.paths import Kind, ObjectId

__all__ = ["AGENT_KIND_OF_JOURNEY", "check_object"]

AGENT_KIND_OF_JOURNEY = "strataplane-agent"

type _Check = Callable[[Fields, Facts], None]

_CHECKS: dict[Kind, _Check] = {
    "Layer": check_layer,
    "Bundle": check_bundle,
    "Route": check_route,
    "Secret": check_secret,
    "Journey": check_journey,
    "ApprovalPolicy": check_approval_policy,
    "RolloutPolicy": check_rollout_policy,
    "Placement": check_placement,
}


def check_object(
    oid: ObjectId,
    value: Mapping[str, object],
    out: Collector,
    *,
    render_levels: range = range(1, 2),
) -> Facts:
    """Check the fields of one parsed file, reporting into ``out``.

    ``render_levels`` are the Settings ``render.level`` values this server supports.
    """
    facts = Facts(oid)
    fields = Fields(out, value)
    facts.owner = fields.string("owner", pattern=TEAM_SLUG, what="team slug")
    if "owner" not in value:
        out.add("SP-2001", None, "required field 'owner' is missing")
    fields.string("description")
    check = _CHECKS.get(oid.kind) or partial(check_settings, render_levels=render_levels)
    check(fields, facts)
    return facts
