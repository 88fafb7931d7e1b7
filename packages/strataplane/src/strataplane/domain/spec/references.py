"""Checks between the objects of one tree (spec-format.md §4.5, §3.9, §5.3 SP-4xxx, SP-3010).

Every reference is checked against the resulting tree, and the diagnostic is reported at the
file that holds the reference, so deleting a Bundle that a Layer uses is reported at the Layer.
"""

from __future__ import annotations

import difflib
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from strataplane.domain.spec.diagnostics import Diagnostic, at
from strataplane.domain.spec.objects import Facts, param_value_ok
from strataplane.domain.spec.paths import parse_path

__all__ = ["TreeContext", "check_references"]


@dataclass(frozen=True, slots=True)
class TreeContext:
    """What the tree checks need from outside the tree. None means "not checked"."""

    teams: frozenset[str] | None = None
    changed_paths: frozenset[str] | None = None  # None: every file counts as changed
    catalog_versions: Mapping[str, Sequence[str]] | None = None  # agent kind -> versions
    offered_models: frozenset[str] | None = None  # "<provider>/<model>" of enabled providers
    base_paths: frozenset[str] = frozenset()  # paths of the base tree
    secrets_with_versions: frozenset[str] = frozenset()  # Secret names with secret_version rows
    secrets_with_values: frozenset[str] | None = None  # names with a current (enabled) version


def _missing_secret(name: str, secrets: Mapping[str, Facts]) -> str:
    close = difflib.get_close_matches(name, list(secrets), n=1)
    fix = f"did you mean secret://{close[0]}?" if close else f"add secrets/{name}.toml"
    return f"Secret {name!r} does not exist; fix: {fix}"


def check_references(facts: Mapping[str, Facts], ctx: TreeContext) -> list[Diagnostic]:
    """Cross-file diagnostics of a tree whose files were checked into ``facts`` (by path)."""
    found: list[Diagnostic] = []

    def add(code: str, path: str, pointer: str | None, message: str) -> None:
        found.append(Diagnostic(code, path, pointer, message))

    by_kind: dict[str, dict[str, Facts]] = defaultdict(dict)
    for f in facts.values():
        by_kind[f.id.kind][f.id.name] = f
    placement_keys: dict[str, list[str]] = defaultdict(list)
    for f in by_kind["Placement"].values():
        if f.placement_key is not None:
            placement_keys[f.placement_key].append(f.id.path)

    for path, f in sorted(facts.items()):
        changed = ctx.changed_paths is None or path in ctx.changed_paths
        if ctx.teams is not None and changed and f.owner is not None and f.owner not in ctx.teams:
            add("SP-2006", path, "owner", f"owner {f.owner!r} is not a team of the tenant")
        for inc in f.inclusions:
            bundle = by_kind["Bundle"].get(inc.name)
            if bundle is None:
                add("SP-4001", path, at(inc.pointer, "name"), f"Bundle {inc.name!r} does not exist")
            elif _kinds_differ(bundle, f):
                msg = f"Bundle {inc.name!r} is for {bundle.agent_kind}, not {f.agent_kind}"
                add("SP-4003", path, at(inc.pointer, "name"), msg)
            else:
                for pointer, message in _param_problems(inc.params, bundle, inc.pointer):
                    add("SP-4007", path, pointer, message)
        for ref in f.names:
            target = by_kind[ref.kind].get(ref.name) if ref.kind != "team" else None
            if ref.kind == "Route" and target is None:
                add("SP-4002", path, ref.pointer, f"Route {ref.name!r} does not exist")
            elif ref.kind == "Route" and target is not None and _kinds_differ(target, f):
                msg = f"Route {ref.name!r} is for {target.agent_kind}, not {f.agent_kind}"
                add("SP-4003", path, ref.pointer, msg)
            elif ref.kind in ("RolloutPolicy", "Journey") and target is None:
                add("SP-4008", path, ref.pointer, f"{ref.kind} {ref.name!r} does not exist")
            elif ref.kind == "team" and ctx.teams is not None and ref.name not in ctx.teams:
                add("SP-4009", path, ref.pointer, f"team {ref.name!r} does not exist")
        for r in f.references:
            if r.scheme == "secret" and r.name not in by_kind["Secret"]:
                add("SP-4004", path, r.pointer, _missing_secret(r.name, by_kind["Secret"]))
            elif (
                r.scheme == "secret"
                and changed
                and ctx.secrets_with_values is not None
                and r.name not in ctx.secrets_with_values
            ):
                msg = (
                    f"Secret {r.name!r} has no value, so the agent would fail to start; "
                    f"fix: strataplane secrets set {r.name}"
                )
                add("SP-4015", path, r.pointer, msg)
        if f.placement_key is not None and len(placement_keys[f.placement_key]) > 1:
            others = ", ".join(p for p in placement_keys[f.placement_key] if p != path)
            add("SP-4010", path, "key", f"label {f.placement_key!r} is also owned by {others}")
        for key, pointer in f.placement_uses:
            if key in placement_keys:
                add("SP-3010", path, pointer, f"{key!r} is a Placement-owned label")
        if f.agent_versions and f.agent_kind and ctx.catalog_versions is not None:
            offered = ctx.catalog_versions.get(f.agent_kind, ())
            if not any(f.agent_versions.matches(v) for v in offered):
                msg = f"no imported catalog bundle of {f.agent_kind} satisfies the requirement"
                add("SP-3008", path, "agentVersions", msg)
        model = f.default_model
        if model is not None and ctx.offered_models is not None and model not in ctx.offered_models:
            add("SP-4014", path, "assistant.defaultModel", f"no enabled provider offers {model!r}")

    by_folded: dict[str, list[str]] = defaultdict(list)
    for name, f in by_kind["Secret"].items():
        by_folded[name.lower()].append(f.id.path)
    for paths in by_folded.values():
        for path in paths if len(paths) > 1 else ():
            add(
                "SP-4013",
                path,
                None,
                f"Secret names differ only in case: {', '.join(sorted(paths))}",
            )
    for path in sorted(ctx.base_paths - set(facts)):
        oid = parse_path(path)
        if isinstance(oid, Diagnostic) or oid.kind != "Secret":
            continue
        if oid.name in ctx.secrets_with_versions:
            msg = f"Secret {oid.name!r} is deleted; its versions stay and return if it is re-added"
            add("SP-4012", path, None, msg)
    return found


def _kinds_differ(a: Facts, b: Facts) -> bool:
    return a.agent_kind is not None and b.agent_kind is not None and a.agent_kind != b.agent_kind


def _param_problems(
    given: Mapping[str, object], bundle: Facts, pointer: str
) -> list[tuple[str, str]]:
    problems = []
    params = at(pointer, "params")
    for name, value in sorted(given.items()):
        decl = bundle.params.get(name)
        if decl is None:
            problems.append(
                (at(params, name), f"Bundle {bundle.id.name!r} has no parameter {name!r}")
            )
        elif not param_value_ok(decl.type, value):
            problems.append((at(params, name), f"parameter {name!r} must be a {decl.type}"))
    for name, decl in sorted(bundle.params.items()):
        if not decl.has_default and name not in given:
            problems.append(
                (params, f"required parameter {name!r} of {bundle.id.name!r} is missing")
            )
    return problems
