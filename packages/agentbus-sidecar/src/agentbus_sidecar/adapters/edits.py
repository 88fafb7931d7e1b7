"""Edits of a harness's configuration document, pure: a document is a mapping parsed from JSON
(or TOML, through tomlkit, which keeps the user's comments and layout), and an edit puts or
takes out one entry at a key path. Taking out also drops the containers that the putting made
and that are empty again, so ``remove(put(doc))`` gives back ``doc``."""

from __future__ import annotations

from collections.abc import Callable, MutableMapping
from dataclasses import dataclass
from typing import Any

__all__ = ["Claim", "ListItem", "Put", "apply_install", "apply_uninstall"]


@dataclass(frozen=True)
class Put:
    """``value`` at ``path`` (keys from the document's root)."""

    path: tuple[str, ...]
    value: Any


@dataclass(frozen=True)
class ListItem:
    """``value`` as one item of the list at ``path``; ``ours`` tells our items from the user's
    (an earlier install with other options wrote a different value)."""

    path: tuple[str, ...]
    value: Any
    ours: Callable[[Any], bool]


@dataclass(frozen=True)
class Claim:
    """``value`` at ``path`` unless the user's own value is there (``ours`` tells): a setting
    that holds one program (Codex's ``notify``) is never taken from its owner."""

    path: tuple[str, ...]
    value: Any
    ours: Callable[[Any], bool]


Edit = Put | ListItem | Claim


def _container(doc: MutableMapping[str, Any], path: tuple[str, ...]) -> MutableMapping[str, Any]:
    node = doc
    for key in path:
        child = node.get(key)
        if not isinstance(child, MutableMapping):
            node[key] = {}
            child = node[key]
        node = child
    return node


def _find(doc: MutableMapping[str, Any], path: tuple[str, ...]) -> list[MutableMapping[str, Any]]:
    """The containers along ``path`` (root first), or [] when one is missing."""
    chain = [doc]
    for key in path:
        child = chain[-1].get(key)
        if not isinstance(child, MutableMapping):
            return []
        chain.append(child)
    return chain


def _prune(chain: list[MutableMapping[str, Any]], path: tuple[str, ...]) -> None:
    for depth in range(len(path), 0, -1):
        if len(chain[depth]) == 0:
            del chain[depth - 1][path[depth - 1]]
        else:
            return


def apply_install(doc: MutableMapping[str, Any], edits: list[Edit]) -> None:
    """Put every entry; an item of ours already in its list with other content is replaced."""
    for edit in edits:
        parent = _container(doc, edit.path[:-1])
        key = edit.path[-1]
        if isinstance(edit, Put | Claim):
            current = parent.get(key)
            mine = isinstance(edit, Put) or current is None or edit.ours(current)
            if mine and current != edit.value:
                parent[key] = edit.value
            continue
        items = parent.get(key)
        if not isinstance(items, list):
            parent[key] = [edit.value]
            continue
        if [item for item in items if edit.ours(item)] != [edit.value]:
            items[:] = [*(item for item in items if not edit.ours(item)), edit.value]


def apply_uninstall(doc: MutableMapping[str, Any], edits: list[Edit]) -> None:
    """Take out exactly our entries, and the containers left empty by that."""
    for edit in reversed(edits):
        chain = _find(doc, edit.path[:-1])
        key = edit.path[-1]
        if not chain or key not in chain[-1]:
            continue
        if isinstance(edit, Put):
            del chain[-1][key]
        elif isinstance(edit, Claim):
            if not edit.ours(chain[-1][key]):
                continue
            del chain[-1][key]
        else:
            items = chain[-1][key]
            if not isinstance(items, list):
                continue
            items[:] = [item for item in items if not edit.ours(item)]
            if items:
                continue
            del chain[-1][key]
        _prune(chain, edit.path[:-1])
