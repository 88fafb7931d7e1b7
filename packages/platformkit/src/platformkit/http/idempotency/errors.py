"""The problems an Idempotency-Key can cause, with the statuses the IETF draft gives them.

draft-ietf-httpapi-idempotency-key-header: a malformed or missing (where required) key is 400;
a key reused with a different request is 422, because the request is well-formed but cannot be
processed as a repeat; a key whose original is still running is 409. Here a repeat *waits* for
the original instead (so 409 only comes after ``wait_timeout``).
"""

from __future__ import annotations

from platformkit.http.problems import ProblemError

__all__ = [
    "IdempotencyKeyInProgress",
    "IdempotencyKeyInvalid",
    "IdempotencyKeyMismatch",
    "IdempotencyKeyNotAccepted",
    "IdempotencyKeyRequired",
]


class IdempotencyKeyInvalid(ProblemError):
    code = "idempotency_key.invalid"
    status = 400
    title = "Invalid Idempotency-Key"


class IdempotencyKeyRequired(ProblemError):
    code = "idempotency_key.required"
    status = 400
    title = "Idempotency-Key required"


class IdempotencyKeyNotAccepted(ProblemError):
    """On routes returning a credential: a stored response would hold the credential."""

    code = "idempotency_key.not_accepted"
    status = 400
    title = "Idempotency-Key not accepted"


class IdempotencyKeyMismatch(ProblemError):
    code = "idempotency_key.mismatch"
    status = 422
    title = "Idempotency-Key reused for a different request"


class IdempotencyKeyInProgress(ProblemError):
    code = "idempotency_key.in_progress"
    status = 409
    title = "A request with this Idempotency-Key is still being processed"
