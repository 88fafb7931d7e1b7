"""Reading the ``Idempotency-Key`` header and fingerprinting the request it came with.

The IETF draft (draft-ietf-httpapi-idempotency-key-header) defines the value as a Structured
Field string, ``Idempotency-Key: "8e03978e-40d5-43e8-bc93-6894a57f9324"``; many clients send it
bare, so both forms are accepted. The key is 1 to 255 characters of printable ASCII (the
table's CHECK allows no more); anything else is a 400 problem.
"""

from __future__ import annotations

import hashlib
import re

from platformkit.http.idempotency.errors import IdempotencyKeyInvalid

__all__ = [
    "HEADER",
    "MAX_KEY_LENGTH",
    "parse_key",
    "request_hash",
]

HEADER = "Idempotency-Key"
MAX_KEY_LENGTH = 255
_BARE = re.compile(r"[\x21-\x7e]+")
_SF_STRING = re.compile(r'"((?:[\x20\x21\x23-\x5b\x5d-\x7e]|\\["\\])*)"')


def parse_key(raw: str | None) -> str | None:
    """The key carried by the header value ``raw``, or None when the header is absent."""
    if raw is None:
        return None
    raw = raw.strip()
    quoted = _SF_STRING.fullmatch(raw)
    if quoted:
        key = re.sub(r"\\(.)", r"\1", quoted.group(1))
    elif _BARE.fullmatch(raw) and '"' not in raw:
        key = raw
    else:
        raise IdempotencyKeyInvalid(
            "the key is a quoted string or a token of printable ASCII characters"
        )
    if not key:
        raise IdempotencyKeyInvalid("the key is empty")
    if len(key) > MAX_KEY_LENGTH:
        raise IdempotencyKeyInvalid(
            f"the key is {len(key)} characters long; at most {MAX_KEY_LENGTH} are allowed",
            max_length=MAX_KEY_LENGTH,
        )
    return key


def request_hash(method: str, path: str, body: bytes) -> bytes:
    """SHA-256 over method, path and body: what makes a repeat "the same request".

    Method and path cannot contain a newline, so the separators keep the fields apart.
    """
    digest = hashlib.sha256()
    digest.update(method.upper().encode("ascii"))
    digest.update(b"\n")
    digest.update(path.encode("utf-8"))
    digest.update(b"\n")
    digest.update(body)
    return digest.digest()
