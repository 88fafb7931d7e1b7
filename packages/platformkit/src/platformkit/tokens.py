"""Bearer tokens: minting ``<prefix><random body>``, hashing for storage, cheap parsing, verifying.

A token is shown to its owner once; only its hash is stored. Two body kinds exist:

* encoded random bytes: ``nbytes`` from ``secrets`` as lowercase base32, URL-safe base64 or
  hex, always without padding;
* a fixed number of characters drawn uniformly from an alphabet (for formats such as
  ``ab_live_`` followed by 40 alphanumerics).

For lists and audit trails a minted token also carries ``display_prefix`` (the prefix plus the
first ``display_length`` body characters, default 8) and ``last4`` (its last four characters).
Those characters are public, so a format is refused unless the rest of the body still holds
at least ``MIN_SECRET_BITS`` of entropy.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import math
import secrets
import string
from dataclasses import dataclass, field
from typing import Literal, Protocol

__all__ = [
    "ALPHANUMERIC",
    "MIN_SECRET_BITS",
    "HmacTokenHasher",
    "InvalidTokenError",
    "MintedToken",
    "Sha256TokenHasher",
    "TokenFormat",
    "TokenHasher",
    "hmac_sha256_hex",
    "mint_token",
    "parse_token",
    "sha256_hex",
    "verify_token",
]

Encoding = Literal["base32", "urlsafe", "hex", "alphabet"]
ALPHANUMERIC = string.ascii_letters + string.digits
MIN_SECRET_BITS = 128
_LAST = 4
_CHARSETS: dict[str, str] = {
    "base32": "abcdefghijklmnopqrstuvwxyz234567",
    "urlsafe": string.ascii_letters + string.digits + "-_",
    "hex": "0123456789abcdef",
}


class InvalidTokenError(ValueError):
    """The string cannot be a token of this format (wrong prefix, length or characters)."""


def _encode(raw: bytes, encoding: str) -> str:
    if encoding == "base32":
        return base64.b32encode(raw).decode().rstrip("=").lower()
    if encoding == "urlsafe":
        return base64.urlsafe_b64encode(raw).decode().rstrip("=")
    return raw.hex()


@dataclass(frozen=True)
class TokenFormat:
    """How tokens of one kind look. Build with ``encoded()`` or ``from_alphabet()``."""

    prefix: str
    encoding: Encoding
    nbytes: int
    alphabet: str
    body_length: int
    display_length: int = 8
    _charset: frozenset[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_charset", frozenset(self.alphabet))
        if len(self._charset) != len(self.alphabet) or len(self.alphabet) < 2:
            raise ValueError("alphabet needs at least two distinct characters")
        if self.display_length < 0:
            raise ValueError("display_length must not be negative")
        hidden = self.body_length - self.display_length - _LAST
        if hidden * math.log2(len(self.alphabet)) < MIN_SECRET_BITS:
            raise ValueError(
                f"the undisplayed part of the body must carry >= {MIN_SECRET_BITS} bits"
            )

    @classmethod
    def encoded(
        cls,
        prefix: str,
        *,
        nbytes: int = 32,
        encoding: Literal["base32", "urlsafe", "hex"] = "base32",
        display_length: int = 8,
    ) -> TokenFormat:
        """Tokens whose body is ``nbytes`` random bytes in ``encoding`` without padding."""
        if encoding not in _CHARSETS:
            raise ValueError(f"unknown encoding {encoding!r}")
        body_length = len(_encode(bytes(nbytes), encoding))
        return cls(prefix, encoding, nbytes, _CHARSETS[encoding], body_length, display_length)

    @classmethod
    def from_alphabet(
        cls, prefix: str, *, length: int, alphabet: str = ALPHANUMERIC, display_length: int = 8
    ) -> TokenFormat:
        """Tokens whose body is ``length`` characters drawn uniformly from ``alphabet``."""
        return cls(prefix, "alphabet", 0, alphabet, length, display_length)

    def new_plaintext(self) -> str:
        if self.encoding == "alphabet":
            body = "".join(secrets.choice(self.alphabet) for _ in range(self.body_length))
        else:
            body = _encode(secrets.token_bytes(self.nbytes), self.encoding)
        return self.prefix + body

    def matches(self, candidate: str) -> bool:
        """Whether ``candidate`` has this prefix, body length and character set."""
        if not isinstance(candidate, str) or not candidate.startswith(self.prefix):
            return False
        body = candidate[len(self.prefix) :]
        return len(body) == self.body_length and self._charset.issuperset(body)


def sha256_hex(token: str) -> str:
    """Lowercase hex SHA-256 of the token's UTF-8 bytes."""
    return hashlib.sha256(token.encode()).hexdigest()


def hmac_sha256_hex(key: bytes, token: str) -> str:
    """Lowercase hex HMAC-SHA256 of the token under ``key``."""
    return hmac.new(key, token.encode(), hashlib.sha256).hexdigest()


def _same(a: str, b: str) -> bool:
    # Bytes, not str: compare_digest refuses non-ASCII str, and a stored value may be anything.
    return hmac.compare_digest(a.encode(), b.encode())


class TokenHasher(Protocol):
    def hash(self, token: str) -> str: ...

    def verify(self, token: str, stored_hash: str) -> bool: ...


class Sha256TokenHasher:
    """Plain SHA-256: enough for high-entropy tokens, and what specs that say "sha256" mean."""

    def hash(self, token: str) -> str:
        return sha256_hex(token)

    def verify(self, token: str, stored_hash: str) -> bool:
        return _same(sha256_hex(token), stored_hash)


class HmacTokenHasher:
    """HMAC-SHA256 under a server key: a leaked hash table alone cannot confirm a guess."""

    def __init__(self, key: bytes) -> None:
        if len(key) < 32:
            raise ValueError("HMAC key must be at least 32 bytes")
        self._key = key

    def __repr__(self) -> str:
        return "HmacTokenHasher(key=<hidden>)"

    def hash(self, token: str) -> str:
        return hmac_sha256_hex(self._key, token)

    def verify(self, token: str, stored_hash: str) -> bool:
        return _same(hmac_sha256_hex(self._key, token), stored_hash)


@dataclass(frozen=True)
class MintedToken:
    """A fresh token. ``plaintext`` goes to the caller once and is never stored or logged."""

    plaintext: str = field(repr=False)
    hash: str
    display_prefix: str
    last4: str


def mint_token(fmt: TokenFormat, hasher: TokenHasher | None = None) -> MintedToken:
    """Mint a token of ``fmt`` and hash it (SHA-256 unless another hasher is given)."""
    plaintext = fmt.new_plaintext()
    digest = (hasher or Sha256TokenHasher()).hash(plaintext)
    display = plaintext[: len(fmt.prefix) + fmt.display_length]
    return MintedToken(plaintext, digest, display, plaintext[-_LAST:])


def parse_token(fmt: TokenFormat, candidate: str) -> str:
    """Return ``candidate`` if it is shaped like a token of ``fmt``, else raise InvalidTokenError.

    Run before hashing or a database lookup so that garbage is rejected cheaply.
    """
    if not fmt.matches(candidate):
        raise InvalidTokenError("malformed token")
    return candidate


def verify_token(fmt: TokenFormat, hasher: TokenHasher, candidate: str, stored_hash: str) -> bool:
    """Shape check, then constant-time comparison of the hash with ``stored_hash``."""
    return fmt.matches(candidate) and hasher.verify(candidate, stored_hash)
