"""Artifacts: content-addressed rendered bytes (schema: artifact), zstd-compressed at rest.

An artifact cannot contain its own hash, yet every heartbeat must prove which artifact runs.
So the stored ``content`` holds a fixed 64-character placeholder in the heartbeat's
``X-Strataplane-Config-Hash`` header, ``hash`` = sha256(content) as the schema says, and the
bytes delivered to the agent are ``content`` with the placeholder replaced by ``hash`` in hex:
a pure function of the artifact, identical on every replica, of the same length.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import zstandard

__all__ = [
    "HASH_HEADER",
    "HASH_PLACEHOLDER",
    "Artifact",
    "compress",
    "decompress",
    "deliverable",
    "make_artifact",
]

HASH_HEADER = "X-Strataplane-Config-Hash"
HASH_PLACEHOLDER = "@" * 64
_LEVEL = 9


@dataclass(frozen=True, slots=True)
class Artifact:
    hash: bytes
    content: bytes  # uncompressed, with the placeholder
    secret_refs: tuple[str, ...] = ()

    @property
    def size(self) -> int:
        return len(self.content)


def make_artifact(content: bytes, secret_refs: tuple[str, ...] = ()) -> Artifact:
    return Artifact(hashlib.sha256(content).digest(), content, secret_refs)


def deliverable(content: bytes, digest: bytes) -> bytes:
    """What the agent receives: the placeholder replaced by the artifact's own hash."""
    return content.replace(HASH_PLACEHOLDER.encode(), digest.hex().encode(), 1)


def compress(content: bytes) -> bytes:
    return zstandard.ZstdCompressor(level=_LEVEL).compress(content)


def decompress(stored: bytes) -> bytes:
    return zstandard.ZstdDecompressor().decompress(stored)
