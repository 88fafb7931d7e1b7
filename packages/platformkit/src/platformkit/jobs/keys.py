"""Advisory-lock keys for leader loops: a (namespace, shard) pair of signed 32-bit integers.

Two-int advisory locks live in a key space of their own, apart from the one-bigint locks the
migrator takes, so a loop's keys can never collide with a migration lock. The namespace is a
hash of a loop name, so every replica derives the same keys without coordination.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

LockKey = tuple[int, int]
"""A two-int advisory lock key: (namespace, shard), both signed 32-bit."""

_INT4 = range(-(2**31), 2**31)


def lock_namespace(name: str) -> int:
    """A stable signed 32-bit namespace for a loop name (``strataplane.controllers``...)."""
    digest = hashlib.sha256(f"platformkit.leader:{name}".encode()).digest()
    return int.from_bytes(digest[:4], "big", signed=True)


def shard_keys(name: str, shards: int | Sequence[int]) -> list[LockKey]:
    """Keys for ``shards`` (a count, or explicit shard numbers) in ``name``'s namespace."""
    numbers = range(shards) if isinstance(shards, int) else shards
    for shard in numbers:
        if shard not in _INT4:
            raise ValueError(f"shard {shard} does not fit a 32-bit advisory key")
    return [(lock_namespace(name), shard) for shard in numbers]
