"""Validation of one edit and of a whole tree (spec-format.md §5).

``check_edit`` is what every edit of a change-set file runs: the path (SP-1001, SP-1002) and
the canonical form (SP-1003 … SP-1006). ``validate_tree`` runs the file checks on every file of
a resulting tree, then the object schemas (SP-2xxx), selectors and versions (SP-3xxx) and the
references between objects (SP-4xxx). Impact, render and permission checks (SP-5xxx, SP-6xxx)
need inventory and are run by the caller, partly through ``compose``.

Diagnostics come back sorted by path, code, pointer and message, so equal trees and contexts
give equal lists.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

from strataplane.domain.spec.canonical import Canonical, Table, canonicalize, parse
from strataplane.domain.spec.catalog_check import line_of
from strataplane.domain.spec.diagnostics import (
    Collector,
    Diagnostic,
    SpecError,
    has_errors,
    sort_diagnostics,
)
from strataplane.domain.spec.kinds import check_object
from strataplane.domain.spec.objects import Facts
from strataplane.domain.spec.paths import ObjectId, parse_path
from strataplane.domain.spec.references import TreeContext, check_references

__all__ = [
    "EditCheck",
    "TreeContext",
    "TreeValidation",
    "check_edit",
    "load_tree",
    "validate_tree",
]


@dataclass(frozen=True, slots=True)
class EditCheck:
    """The outcome of an edit: the canonical file, or the diagnostics that reject it."""

    object: ObjectId | None
    canonical: Canonical | None
    diagnostics: tuple[Diagnostic, ...]

    @property
    def ok(self) -> bool:
        return self.canonical is not None


def check_edit(path: str, data: bytes) -> EditCheck:
    """Check the path and canonicalize ``data``; SP-1006 (info) does not reject."""
    oid = parse_path(path)
    if isinstance(oid, Diagnostic):
        return EditCheck(None, None, (oid,))
    try:
        canonical = canonicalize(data, path)
    except SpecError as exc:
        return EditCheck(oid, None, tuple(sort_diagnostics(exc.diagnostics)))
    return EditCheck(oid, canonical, canonical.notices)


@dataclass(frozen=True, slots=True)
class TreeValidation:
    diagnostics: tuple[Diagnostic, ...]
    objects: Mapping[str, ObjectId]  # by path: the files that parsed
    values: Mapping[str, Table]  # by path: the files that parsed
    facts: Mapping[str, Facts]

    @property
    def ok(self) -> bool:
        """A validation succeeds when no diagnostic has severity ``error``."""
        return not has_errors(self.diagnostics)

    def per_file(self) -> dict[str | None, list[Diagnostic]]:
        out: dict[str | None, list[Diagnostic]] = {}
        for d in self.diagnostics:
            out.setdefault(d.path, []).append(d)
        return out


def load_tree(tree: Mapping[str, bytes]) -> tuple[dict[str, Table], list[Diagnostic]]:
    """Parse every file of a tree (path -> content); the values of the files that parse."""
    values: dict[str, Table] = {}
    diagnostics: list[Diagnostic] = []
    for path in sorted(tree):
        oid = parse_path(path)
        if isinstance(oid, Diagnostic):
            diagnostics.append(oid)
            continue
        try:
            values[path] = parse(tree[path])
        except SpecError as exc:
            diagnostics += (Diagnostic(d.code, path, d.pointer, d.message) for d in exc.diagnostics)
    return values, diagnostics


def _with_line(d: Diagnostic, tree: Mapping[str, bytes]) -> Diagnostic:
    """A reference diagnostic names the line of the value it is about (the canonical file)."""
    if d.code != "SP-4004" or d.path is None or d.pointer is None or "." not in d.pointer:
        return d
    table, key = d.pointer.rsplit(".", 1)
    line = line_of(tree[d.path].decode(errors="replace"), table, key)
    return d if line is None else replace(d, message=f"line {line}: {d.message}")


def validate_tree(
    tree: Mapping[str, bytes],
    ctx: TreeContext | None = None,
    *,
    render_levels: range = range(1, 2),
) -> TreeValidation:
    """Validate every file of ``tree`` (path -> canonical content) and the links between them."""
    ctx = ctx or TreeContext()
    values, diagnostics = load_tree(tree)
    objects: dict[str, ObjectId] = {}
    facts: dict[str, Facts] = {}
    for path, value in values.items():
        oid = parse_path(path)
        assert isinstance(oid, ObjectId)  # load_tree kept only valid paths
        objects[path] = oid
        out = Collector(path)
        facts[path] = check_object(oid, value, out, render_levels=render_levels)
        diagnostics += out.diagnostics
    diagnostics += (_with_line(d, tree) for d in check_references(facts, ctx))
    return TreeValidation(tuple(sort_diagnostics(diagnostics)), objects, values, facts)
