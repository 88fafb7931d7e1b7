"""Password hashing with argon2id: one policy object, hash, verify (bool) and rehash checks.

Stored values are PHC strings (``$argon2id$v=19$m=...,t=...,p=...$salt$hash``), which carry their
own parameters, so a hash made under an older policy still verifies after the policy changes;
``needs_rehash`` tells the login path when to replace it.
"""

from __future__ import annotations

import functools
import secrets
from dataclasses import dataclass

from argon2 import PasswordHasher, Type
from argon2.exceptions import InvalidHashError, VerificationError
from prometheus_client import Counter

__all__ = [
    "CHECKS",
    "DEFAULT_POLICY",
    "FAST_TEST_POLICY",
    "PasswordPolicy",
    "hash_password",
    "needs_rehash",
    "verify_password",
    "verify_password_or_dummy",
]


@dataclass(frozen=True)
class PasswordPolicy:
    """argon2id cost parameters. ``memory_cost`` is in KiB.

    The defaults are the RFC 9106 "low memory" recommendation (t=3, 64 MiB, p=4).
    """

    time_cost: int = 3
    memory_cost: int = 64 * 1024
    parallelism: int = 4

    @classmethod
    def fast(cls) -> PasswordPolicy:
        """Minimal costs for tests only: a hash takes well under a millisecond."""
        return cls(time_cost=1, memory_cost=8, parallelism=1)


# Sign-in checks by result: a "unknown_account" check ran against the dummy hash.
CHECKS = Counter(
    "platformkit_password_checks",
    "Password checks at sign-in, by result (match, mismatch, unknown_account)",
    ["result"],
)

DEFAULT_POLICY = PasswordPolicy()
FAST_TEST_POLICY = PasswordPolicy.fast()


@functools.lru_cache(maxsize=8)
def _hasher(policy: PasswordPolicy) -> PasswordHasher:
    return PasswordHasher(
        time_cost=policy.time_cost,
        memory_cost=policy.memory_cost,
        parallelism=policy.parallelism,
        type=Type.ID,
    )


def hash_password(password: str, policy: PasswordPolicy = DEFAULT_POLICY) -> str:
    """Hash ``password`` with a fresh random salt; returns the PHC string to store."""
    return _hasher(policy).hash(password)


def verify_password(
    password: str, stored_hash: str, policy: PasswordPolicy = DEFAULT_POLICY
) -> bool:
    """True if ``password`` matches ``stored_hash``.

    False for a wrong password and for a stored value that is not a valid argon2 hash: a
    corrupt row must look like a failed login, not crash the request.
    """
    try:
        return _hasher(policy).verify(stored_hash, password)
    except (VerificationError, InvalidHashError):
        return False


@functools.lru_cache(maxsize=8)
def _dummy_hash(policy: PasswordPolicy) -> str:
    # A hash of a random value nobody knows, made once per process and policy.
    return hash_password(secrets.token_urlsafe(24), policy)


def verify_password_or_dummy(
    stored_hash: str | None, password: str, policy: PasswordPolicy = DEFAULT_POLICY
) -> bool:
    """``verify_password`` for a login whose account may not exist (``stored_hash`` None).

    Without a hash it verifies ``password`` against a fixed dummy hash of the same policy and
    returns False, so an unknown user costs the same argon2 work as a wrong password and the
    time of the answer does not tell which accounts exist.
    """
    if stored_hash is None:
        verify_password(password, _dummy_hash(policy), policy)
        CHECKS.labels("unknown_account").inc()
        return False
    ok = verify_password(password, stored_hash, policy)
    CHECKS.labels("match" if ok else "mismatch").inc()
    return ok


def needs_rehash(stored_hash: str, policy: PasswordPolicy = DEFAULT_POLICY) -> bool:
    """True if ``stored_hash`` was made with other parameters (or another variant) than ``policy``.

    Call after a successful ``verify_password``, while the plaintext is at hand, and store a
    new ``hash_password`` result when it says so. An unparseable value also needs a rehash.
    """
    try:
        return _hasher(policy).check_needs_rehash(stored_hash)
    except InvalidHashError:
        return True
