"""Tamper-evident audit trails: hash-chained rows, a verifier, and signed checkpoints.

``chain`` defines the row hash, ``verify`` walks stored rows and names the first bad one, and
``checkpoint`` signs and checks "chain C had hash H at seq N" statements with Ed25519.
"""

from platformkit.audit.chain import GENESIS, HASH_SIZE, AuditChain, AuditRow, chain_hash
from platformkit.audit.checkpoint import (
    Checkpoint,
    checkpoint_message,
    sign_checkpoint,
    verify_checkpoint,
)
from platformkit.audit.verify import BreakReason, ChainRow, VerifyResult, verify_chain

__all__ = [
    "GENESIS",
    "HASH_SIZE",
    "AuditChain",
    "AuditRow",
    "BreakReason",
    "ChainRow",
    "Checkpoint",
    "VerifyResult",
    "chain_hash",
    "checkpoint_message",
    "sign_checkpoint",
    "verify_chain",
    "verify_checkpoint",
]
