"""Every write path of the brain's actions appends an audit row.

The guard reads the source of every public coroutine in ``z4j.actions``: when it reaches, through
its own module's helpers or other actions, a store function whose SQL inserts, updates or
deletes (or runs such SQL itself), it must also reach ``audit.record``. New actions are covered
by the same rule without being listed here; the only exceptions are below, each with its reason.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
import re
from dataclasses import dataclass, field
from types import ModuleType

import z4j.actions

_WRITE_SQL = re.compile(r"(?<!FOR )\b(INSERT|UPDATE|DELETE)\b")  # not a row lock
NOT_AUDITED = {
    # Sliding a session's expiry on a request is bookkeeping, at most once an hour per session.
    "z4j.actions.sessions.resolve",
    # Recording an API key's last use is bookkeeping, at most once a minute per key.
    "z4j.actions.api_keys.authenticate",
    # The audit chain's own append.
    "z4j.actions.audit.record",
}


@dataclass
class Reach:
    writes: set[str] = field(default_factory=set)
    audits: bool = False


def _modules() -> list[ModuleType]:
    return [
        importlib.import_module(f"z4j.actions.{m.name}")
        for m in pkgutil.iter_modules(z4j.actions.__path__)
    ]


def _imports(tree: ast.Module) -> dict[str, str]:
    """Local name -> dotted target for ``from z4j... import x [as y]``."""
    names = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("z4j"):
            for alias in node.names:
                names[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    return names


def _functions(tree: ast.Module) -> dict[str, ast.AsyncFunctionDef | ast.FunctionDef]:
    return {n.name: n for n in tree.body if isinstance(n, (ast.AsyncFunctionDef, ast.FunctionDef))}


class Guard:
    def __init__(self) -> None:
        self.trees: dict[str, ast.Module] = {}
        self.memo: dict[str, Reach] = {}

    def tree(self, module: str) -> ast.Module:
        """The module's syntax tree; empty for a dotted name that is no module (a class)."""
        if module not in self.trees:
            try:
                source = inspect.getsource(importlib.import_module(module))
            except ModuleNotFoundError:
                source = ""
            self.trees[module] = ast.parse(source)
        return self.trees[module]

    def store_writes(self, dotted: str) -> bool:
        module, _, name = dotted.rpartition(".")
        node = _functions(self.tree(module)).get(name)
        return node is not None and bool(_WRITE_SQL.search(ast.unparse(node)))

    def reach(self, dotted: str, seen: frozenset[str] = frozenset()) -> Reach:
        if dotted in self.memo:
            return self.memo[dotted]
        module, _, name = dotted.rpartition(".")
        out = Reach()
        node = _functions(self.tree(module)).get(name)
        if node is None or dotted in seen:
            return out
        imports = _imports(self.tree(module))
        local = _functions(self.tree(module))
        for sub in ast.walk(node):
            own_sql = isinstance(sub, ast.Constant) and isinstance(sub.value, str)
            if own_sql and _WRITE_SQL.search(sub.value) and not sub.value.startswith("SELECT"):
                out.writes.add(f"{dotted} (own SQL)")
            if not isinstance(sub, ast.Call):
                continue
            target = None
            if isinstance(sub.func, ast.Name):
                if sub.func.id in local:
                    target = f"{module}.{sub.func.id}"
                elif sub.func.id in imports:
                    target = imports[sub.func.id]
            elif isinstance(sub.func, ast.Attribute) and isinstance(sub.func.value, ast.Name):
                owner = imports.get(sub.func.value.id)
                if owner is not None:
                    target = f"{owner}.{sub.func.attr}"
            if target is None:
                continue
            if target == "z4j.actions.audit.record":
                out.audits = True
            elif target.startswith("z4j.store.") and self.store_writes(target):
                out.writes.add(target)
            elif target.startswith("z4j.actions."):
                deeper = self.reach(target, seen | {dotted})
                out.writes |= deeper.writes
                out.audits = out.audits or deeper.audits
        self.memo[dotted] = out
        return out


def public_actions() -> list[str]:
    found = []
    for module in _modules():
        for name, fn in inspect.getmembers(module, inspect.iscoroutinefunction):
            if fn.__module__ == module.__name__ and not name.startswith("_"):
                found.append(f"{module.__name__}.{name}")
    return found


def test_every_writing_action_appends_an_audit_row() -> None:
    guard = Guard()
    unaudited = {}
    writers = []
    for dotted in public_actions():
        reach = guard.reach(dotted)
        if reach.writes:
            writers.append(dotted)
            if not reach.audits and dotted not in NOT_AUDITED:
                unaudited[dotted] = sorted(reach.writes)
    assert unaudited == {}, f"actions that write without audit.record: {unaudited}"
    # The guard sees the writes it is meant to see (it is not vacuous).
    for known in ("z4j.actions.passwords.reset_password", "z4j.actions.api_keys.create_key",
                  "z4j.actions.members.change_role", "z4j.actions.invitations.accept"):  # fmt: skip
        assert known in writers


def test_the_guard_catches_a_write_without_audit() -> None:
    guard = Guard()
    assert guard.reach("z4j.actions.sessions.resolve").writes
    assert not guard.reach("z4j.actions.sessions.resolve").audits
    assert guard.reach("z4j.actions.passwords.reset_password").audits
