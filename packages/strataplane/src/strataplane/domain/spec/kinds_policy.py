"""Field checks of the kinds that govern rather than configure: Secret, ApprovalPolicy,
RolloutPolicy, Settings, Placement (spec-format.md §3.4, §3.6 … §3.9).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping

from strataplane.domain.spec.agentconfig import parse_reference
from strataplane.domain.spec.diagnostics import at
from strataplane.domain.spec.fields import AGENT_KINDS, LOCAL_NAME, TEAM_SLUG, Fields
from strataplane.domain.spec.kinds_agent import COMMON, OBJECT_NAME
from strataplane.domain.spec.objects import Facts, NameRef
from strataplane.domain.spec.paths import KINDS
from strataplane.domain.spec.selectors import (
    BUILTIN_LABELS,
    LABEL_KEY,
    label_value_problem,
    parse_selector,
)

__all__ = [
    "check_approval_policy",
    "check_placement",
    "check_rollout_policy",
    "check_secret",
    "check_settings",
]

_VALUE_HINT = " (a Secret declares who may receive it; values are written through the secrets API)"
_MODEL = re.compile(r"[^/]+/.+")
TOKENS = ("@owners", "@hostOwners")


def _agent_kinds(f: Fields) -> None:
    for i, kind in enumerate(f.strings("agentKinds") or []):
        if kind not in AGENT_KINDS:
            f.out.add("SP-2004", at(f.at("agentKinds"), i), f"{kind!r} is not an agent kind")


def check_secret(f: Fields, facts: Facts) -> None:
    f.known((*COMMON, "grant", "minAssurance"), ("grant",), hint=_VALUE_HINT)
    f.string("minAssurance", choices=("low", "high"))
    if "grant" in f.table:
        grant = f.table["grant"]
        parse_selector(grant, f.out, f.at("grant"), extra=frozenset({"agentKinds"}))
        if isinstance(grant, Mapping):
            _agent_kinds(Fields(f.out, grant, f.at("grant")))


def check_approval_policy(f: Fields, facts: Facts) -> None:
    f.known((*COMMON, "rules"), ("rules",))
    rules = f.tables("rules")
    if rules is not None and not f.table["rules"]:
        f.invalid("rules", "an ApprovalPolicy needs at least one rule")
    seen: set[str] = set()
    for rule in rules or []:
        rule.known(("name", "teams", "mode", "count", "when"), ("name", "teams"))
        name = rule.string("name", pattern=LOCAL_NAME, what="rule name")
        if name is not None and name in seen:
            f.out.add("SP-2005", rule.at("name"), f"rule name {name!r} is used twice")
        seen.add(name or "")
        teams = rule.strings("teams")
        if teams is not None and not rule.table["teams"]:
            rule.invalid("teams", "a rule names at least one team")
        for i, team in enumerate(teams or []):
            if team in TOKENS:
                continue
            if TEAM_SLUG.fullmatch(team):
                facts.names.append(NameRef("team", team, at(rule.at("teams"), i)))
            else:
                rule.out.add("SP-2004", at(rule.at("teams"), i), f"invalid team {team!r}")
        rule.string("mode", choices=("all", "any"))
        rule.integer("count", 1, 10)
        when = rule.sub("when")
        if when is None:
            continue
        when.known(("kinds", "paths", "owners", "selector", "minImpactedAgents"))
        for i, kind in enumerate(when.strings("kinds") or []):
            if kind not in KINDS:
                when.out.add("SP-2004", at(when.at("kinds"), i), f"{kind!r} is not a kind")
        when.strings("paths")
        for i, team in enumerate(when.strings("owners", pattern=TEAM_SLUG, what="team") or []):
            facts.names.append(NameRef("team", team, at(when.at("owners"), i)))
        if "selector" in when.table:
            parse_selector(when.table["selector"], when.out, when.at("selector"))
        when.integer("minImpactedAgents", 0)


def check_rollout_policy(f: Fields, facts: Facts) -> None:
    f.known((*COMMON, "agentKinds", "stages", "guardrails"), ("stages",))
    _agent_kinds(f)
    stages = f.tables("stages")
    raw = f.table.get("stages")
    if isinstance(raw, list) and not 1 <= len(raw) <= 20:
        f.invalid("stages", "a RolloutPolicy has 1 to 20 stages")
    seen: set[str] = set()
    last = len(stages or []) - 1
    for i, stage in enumerate(stages or []):
        stage.known(("name", "selector", "bakeTime"), ("name",))
        name = stage.string("name", pattern=LOCAL_NAME, what="stage name")
        if name is not None and name in seen:
            f.out.add("SP-2005", stage.at("name"), f"stage name {name!r} is used twice")
        seen.add(name or "")
        stage.duration("bakeTime")
        if "selector" in stage.table:
            selector = parse_selector(stage.table["selector"], f.out, stage.at("selector"))
            if i == last and selector is not None and not selector.is_empty:
                f.out.add("SP-3009", stage.at("selector"), "the last stage must match every host")
    guardrails = f.sub("guardrails")
    if guardrails is not None:
        limits = ("maxApplyFailurePercent", "maxHealthRegressionPercent")
        guardrails.known((*limits, "journeys"))
        for limit in limits:
            guardrails.number(limit, 0, 100)
        journeys = guardrails.strings("journeys", pattern=OBJECT_NAME, what="Journey name")
        for i, journey in enumerate(journeys or []):
            facts.names.append(NameRef("Journey", journey, at(guardrails.at("journeys"), i)))


type _Spec = Mapping[str, "_Spec"] | Callable[[Fields, str, Facts], None]


def _dur(f: Fields, key: str, facts: Facts) -> None:
    f.duration(key)


def _count(hi: int, lo: int = 0) -> Callable[[Fields, str, Facts], None]:
    def check(f: Fields, key: str, facts: Facts) -> None:
        f.integer(key, lo, hi)

    return check


def _default_policy(f: Fields, key: str, facts: Facts) -> None:
    if (name := f.string(key, pattern=OBJECT_NAME, what="RolloutPolicy name")) is not None:
        facts.names.append(NameRef("RolloutPolicy", name, f.at(key)))


def _model(f: Fields, key: str, facts: Facts) -> None:
    facts.default_model = f.string(key, pattern=_MODEL, what="model (<provider name>/<model id>)")


def _text(f: Fields, key: str, facts: Facts) -> None:
    f.string(key)


def _file(f: Fields, key: str, facts: Facts) -> None:
    """A file on the agent's host: a path, or ``env://NAME`` for a path that differs by host."""
    value = f.string(key)
    if value is None:
        return
    ref = parse_reference(value)
    if ref is not None and ref[1] is None:
        f.invalid(key, f"invalid reference {value!r} (env://NAME)")
    elif ref is not None and ref[0] != "env":
        f.invalid(key, f"{ref[0]}:// is not allowed here: a file path or env://NAME")
    elif ref is None and (not value or any(c in value for c in "$\n\r\x00")):
        f.invalid(key, f"invalid file path {value!r}")


_HEARTBEAT: _Spec = {"heartbeat": {"interval": _dur}}
_TELEGRAF: _Spec = {
    "heartbeat": {"interval": _dur},
    "tls": {"ca": _file, "cert": _file, "key": _file},
}
SETTINGS: _Spec = {
    "render": {"level": _count(2**31 - 1, 1)},
    "review": {"minimumApprovals": _count(10)},
    "rollout": {"defaultPolicy": _default_policy},
    "retention": {
        "silentAgents": _dur,
        "agentLogs": _dur,
        "artifactsUnreferenced": _dur,
        "failedRunsKept": _count(10_000),
        "passedRunsKept": _count(10_000),
    },
    "telegraf": _TELEGRAF,
    "vector": _HEARTBEAT,
    "elastic-agent": {"pollTimeout": _dur},
    "strataplane-agent": {"checkin": {"interval": _dur}},
    "assistant": {"defaultModel": _model, "promptAddendum": _text},
}


def _walk(f: Fields, spec: Mapping[str, _Spec], facts: Facts) -> None:
    for key in sorted(set(spec) & set(f.table)):
        rule = spec[key]
        if isinstance(rule, Mapping):
            if (sub := f.sub(key)) is not None:
                sub.known(rule)
                _walk(sub, rule, facts)
        else:
            rule(f, key, facts)


def check_settings(f: Fields, facts: Facts, render_levels: range = range(1, 2)) -> None:
    assert isinstance(SETTINGS, Mapping)
    f.known((*COMMON, *SETTINGS))
    _walk(f, SETTINGS, facts)
    render = f.table.get("render")
    level = render.get("level") if isinstance(render, Mapping) else None
    telegraf = f.table.get("telegraf")
    tls = telegraf.get("tls") if isinstance(telegraf, Mapping) else None
    if isinstance(tls, Mapping) and ("cert" in tls) != ("key" in tls):
        missing = "key" if "cert" in tls else "cert"
        msg = f"telegraf.tls needs {missing!r} too: cert and key go together"
        f.out.add("SP-2001", at(f.at("telegraf"), "tls"), msg)
    if isinstance(level, int) and level >= 1 and level not in render_levels:
        levels = f"{render_levels.start} … {render_levels.stop - 1}"
        f.out.add("SP-2004", "render.level", f"render level {level} is not supported ({levels})")


def check_placement(f: Fields, facts: Facts) -> None:
    f.known((*COMMON, "key", "value", "count", "groupBy", "candidates"), ("key", "count"))
    key = f.string("key", pattern=LABEL_KEY, what="label key")
    if key in BUILTIN_LABELS:
        f.out.add("SP-4010", f.at("key"), f"{key!r} is a built-in label")
    elif key is not None:
        facts.placement_key = key
    if (value := f.string("value")) is not None and (problem := label_value_problem(value)):
        f.invalid("value", problem)
    f.integer("count", 1, 1000)
    if (group := f.string("groupBy", pattern=LABEL_KEY, what="label key")) is not None:
        facts.placement_uses.append((group, f.at("groupBy")))
    if "candidates" in f.table:
        raw = f.table["candidates"]
        extra = frozenset({"agentKinds"})
        selector = parse_selector(raw, f.out, f.at("candidates"), extra=extra)
        if isinstance(raw, Mapping):
            _agent_kinds(Fields(f.out, raw, f.at("candidates")))
        for used in sorted(selector.keys() if selector else ()):
            facts.placement_uses.append((used, f.at("candidates")))
