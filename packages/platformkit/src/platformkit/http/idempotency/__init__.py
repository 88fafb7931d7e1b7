"""Idempotency-Key support: claim, store and replay responses of creating requests."""

from platformkit.http.idempotency.component import (
    REPLAYED_HEADER,
    Idempotency,
    IdempotentReplay,
    TenantScope,
    rls_scope,
)
from platformkit.http.idempotency.depends import no_idempotency_key
from platformkit.http.idempotency.errors import (
    IdempotencyKeyInProgress,
    IdempotencyKeyInvalid,
    IdempotencyKeyMismatch,
    IdempotencyKeyNotAccepted,
    IdempotencyKeyRequired,
)
from platformkit.http.idempotency.keys import HEADER, MAX_KEY_LENGTH, request_hash

__all__ = [
    "HEADER",
    "MAX_KEY_LENGTH",
    "REPLAYED_HEADER",
    "Idempotency",
    "IdempotencyKeyInProgress",
    "IdempotencyKeyInvalid",
    "IdempotencyKeyMismatch",
    "IdempotencyKeyNotAccepted",
    "IdempotencyKeyRequired",
    "IdempotentReplay",
    "TenantScope",
    "no_idempotency_key",
    "request_hash",
    "rls_scope",
]
