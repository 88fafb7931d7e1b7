"""Ed25519-signed checkpoints: a signed statement "chain C had hash H at seq N".

A checkpoint published or stored out of band catches what the chain alone cannot: deletion of
the newest rows, or a plain (unkeyed) chain rewritten from some row onwards.

The signed message is the ASCII tag ``audit-checkpoint/v1`` and a newline, followed by
``canonical_json({"chain": C, "hash": <hex of H>, "seq": N})``. The chain name keeps a
checkpoint of one chain (say, one tenant's) from being presented for another.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from wirekit import canonical_json

from platformkit.audit.chain import HASH_SIZE

__all__ = ["Checkpoint", "checkpoint_message", "sign_checkpoint", "verify_checkpoint"]

_TAG = b"audit-checkpoint/v1\n"


@dataclass(frozen=True)
class Checkpoint:
    seq: int
    hash: bytes
    signature: bytes
    chain: str = ""

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form: hash as hex, signature as URL-safe base64 without padding."""
        sig = base64.urlsafe_b64encode(self.signature).decode().rstrip("=")
        return {"chain": self.chain, "seq": self.seq, "hash": self.hash.hex(), "signature": sig}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Checkpoint:
        sig = str(data["signature"])
        return cls(
            seq=int(data["seq"]),
            hash=bytes.fromhex(str(data["hash"])),
            signature=base64.urlsafe_b64decode(sig + "=" * (-len(sig) % 4)),
            chain=str(data.get("chain", "")),
        )


def checkpoint_message(seq: int, hash: bytes, chain: str = "") -> bytes:
    """The exact bytes that are signed for a checkpoint."""
    if len(hash) != HASH_SIZE:
        raise ValueError(f"chain hash must be {HASH_SIZE} bytes")
    return _TAG + canonical_json({"chain": chain, "hash": hash.hex(), "seq": seq})


def sign_checkpoint(
    private_key: Ed25519PrivateKey, seq: int, hash: bytes, *, chain: str = ""
) -> Checkpoint:
    """Sign that ``chain`` reached ``hash`` at ``seq``."""
    signature = private_key.sign(checkpoint_message(seq, hash, chain))
    return Checkpoint(seq=seq, hash=bytes(hash), signature=signature, chain=chain)


def verify_checkpoint(public_key: Ed25519PublicKey, checkpoint: Checkpoint) -> bool:
    """True only if the signature covers exactly this seq, hash and chain name."""
    try:
        message = checkpoint_message(checkpoint.seq, checkpoint.hash, checkpoint.chain)
        public_key.verify(checkpoint.signature, message)
    except (InvalidSignature, ValueError):
        return False
    return True
