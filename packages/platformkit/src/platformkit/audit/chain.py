"""Hash-chained audit rows: the chain hash definition and an in-memory appender.

Each row stores ``seq``, ``event``, ``prev_hash`` and ``hash`` where::

    hash = SHA-256(prev_hash || canonical_json(event))                 (plain chain)
    hash = HMAC-SHA256(server_key, prev_hash || canonical_json(event))  (keyed chain)

``prev_hash`` of the first row is ``GENESIS``: 32 zero bytes. ``None`` is accepted wherever a
previous hash is an input and always means ``GENESIS``, so a nullable column and the zero value
verify the same way. Rows store the 32 bytes, never ``None``.

``seq`` is not hashed; the verifier checks it structurally (consecutive, increasing). Callers
that need the time, actor or tenant protected put them in the event.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from wirekit import canonical_json

__all__ = ["GENESIS", "HASH_SIZE", "AuditChain", "AuditRow", "chain_hash"]

HASH_SIZE = 32
GENESIS = bytes(HASH_SIZE)
MIN_KEY_SIZE = 32


def _prev_or_genesis(prev: bytes | None) -> bytes:
    if prev is None:
        return GENESIS
    if len(prev) != HASH_SIZE:
        # A fixed width keeps prev || event unambiguous.
        raise ValueError(f"previous hash must be {HASH_SIZE} bytes, got {len(prev)}")
    return bytes(prev)


def chain_hash(prev: bytes | None, event: Mapping[str, Any], *, key: bytes | None = None) -> bytes:
    """Return the 32-byte hash of a row whose predecessor hashed to ``prev``.

    With ``key`` the HMAC-SHA256 variant is used, so someone who can edit the table but does
    not hold the server key cannot recompute a consistent chain.
    """
    message = _prev_or_genesis(prev) + canonical_json(dict(event))
    if key is None:
        return hashlib.sha256(message).digest()
    if len(key) < MIN_KEY_SIZE:
        raise ValueError(f"chain key must be at least {MIN_KEY_SIZE} bytes")
    return hmac.new(key, message, hashlib.sha256).digest()


@dataclass(frozen=True)
class AuditRow:
    """One link of a chain, as stored."""

    seq: int
    event: Mapping[str, Any]
    prev_hash: bytes
    hash: bytes


class AuditChain:
    """Appends rows to a chain held in memory.

    A store that keeps the chain in a table resumes from its last row with
    ``AuditChain(head=last.hash, next_seq=last.seq + 1)`` while holding the lock that
    serialises appends, so two writers never link to the same predecessor.
    """

    def __init__(
        self, *, key: bytes | None = None, head: bytes | None = None, next_seq: int = 1
    ) -> None:
        self._key = key
        self._head = _prev_or_genesis(head)
        self._next_seq = next_seq
        if key is not None and len(key) < MIN_KEY_SIZE:
            raise ValueError(f"chain key must be at least {MIN_KEY_SIZE} bytes")

    def __repr__(self) -> str:
        keyed = "keyed" if self._key is not None else "plain"
        return f"AuditChain({keyed}, next_seq={self._next_seq}, head={self._head.hex()[:16]})"

    @property
    def head(self) -> bytes:
        """Hash of the last appended row (``GENESIS`` for an empty chain)."""
        return self._head

    @property
    def next_seq(self) -> int:
        return self._next_seq

    def append(self, event: Mapping[str, Any]) -> AuditRow:
        """Link ``event`` after the current head and return the row to store."""
        digest = chain_hash(self._head, event, key=self._key)
        row = AuditRow(seq=self._next_seq, event=event, prev_hash=self._head, hash=digest)
        self._head = digest
        self._next_seq += 1
        return row
