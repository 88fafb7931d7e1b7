"""Trees, overlays and their hashes (architecture.md §2.4, §3.2, §3.3).

A *tree* maps each path to the 32-byte hash of its blob. An *overlay* maps each changed path
to its new blob hash, or None for a deletion. ``tree_hash`` is ``spec_revision.tree_hash``;
``change_set_digest`` is ``change_set.digest``. Both are defined byte for byte in the docs;
the test vectors there are checked by the tests.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping

__all__ = [
    "EMPTY_TREE_HASH",
    "Overlay",
    "Tree",
    "apply_overlay",
    "change_set_digest",
    "diff_trees",
    "normalize_overlay",
    "tree_hash",
]

type Tree = Mapping[str, bytes]
type Overlay = Mapping[str, bytes | None]

EMPTY_TREE_HASH = hashlib.sha256(b"").digest()
_HASH_BYTES = 32


def _check_entry(path: str, blob: bytes | None) -> None:
    # Unambiguity of the encodings rests on these two facts, so they are checked, not assumed.
    if "\x00" in path:
        raise ValueError(f"path {path!r} contains NUL")
    if blob is not None and len(blob) != _HASH_BYTES:
        raise ValueError(f"blob hash of {path!r} is {len(blob)} bytes, not {_HASH_BYTES}")


def tree_hash(tree: Tree) -> bytes:
    """SHA-256 over ``utf8(path) || 0x00 || blob_hash`` of every file, by path in byte order."""
    h = hashlib.sha256()
    for path in sorted(tree):
        _check_entry(path, tree[path])
        h.update(path.encode("utf-8") + b"\x00" + tree[path])
    return h.digest()


def change_set_digest(base_revision_id: int, overlay: Overlay) -> bytes:
    """SHA-256 over ``be64(base) || (utf8(path) || 0x00 || entry)*`` by path in byte order,
    where entry is ``0x01 || blob_hash`` for a write and ``0x00`` for a deletion."""
    if not 0 <= base_revision_id < 2**64:
        raise ValueError(f"revision {base_revision_id} does not fit 64 unsigned bits")
    h = hashlib.sha256(base_revision_id.to_bytes(8, "big"))
    for path in sorted(overlay):
        blob = overlay[path]
        _check_entry(path, blob)
        entry = b"\x00" if blob is None else b"\x01" + blob
        h.update(path.encode("utf-8") + b"\x00" + entry)
    return h.digest()


def apply_overlay(tree: Tree, overlay: Overlay) -> dict[str, bytes]:
    """The resulting tree: ``tree`` with each overlay row written or deleted."""
    result = dict(tree)
    for path, blob in overlay.items():
        if blob is None:
            result.pop(path, None)
        else:
            result[path] = blob
    return result


def diff_trees(old: Tree, new: Tree, paths: Iterable[str] | None = None) -> dict[str, bytes | None]:
    """The overlay that turns ``old`` into ``new`` (only ``paths`` when given)."""
    candidates = set(old) | set(new) if paths is None else set(paths)
    return {p: new.get(p) for p in sorted(candidates) if old.get(p) != new.get(p)}


def normalize_overlay(base: Tree, overlay: Overlay) -> dict[str, bytes | None]:
    """Drop no-op rows: writes of the base content and deletions of absent paths (§3.2)."""
    return {p: b for p, b in sorted(overlay.items()) if base.get(p) != b}
