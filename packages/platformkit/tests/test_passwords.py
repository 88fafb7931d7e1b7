"""argon2id passwords: PHC format, verify as bool, rehash when the policy changes."""

from __future__ import annotations

import pytest
from argon2 import PasswordHasher, Type
from hypothesis import given, settings
from hypothesis import strategies as st
from platformkit.passwords import (
    DEFAULT_POLICY,
    FAST_TEST_POLICY,
    PasswordPolicy,
    hash_password,
    needs_rehash,
    verify_password,
)

FAST = FAST_TEST_POLICY


def test_phc_string_is_argon2id_with_policy_parameters() -> None:
    stored = hash_password("correct horse", FAST)
    assert stored.startswith("$argon2id$v=19$m=8,t=1,p=1$")
    assert "correct horse" not in stored


def test_default_policy_is_rfc9106_low_memory() -> None:
    assert (DEFAULT_POLICY.time_cost, DEFAULT_POLICY.memory_cost, DEFAULT_POLICY.parallelism) == (
        3,
        65536,
        4,
    )


def test_verify_true_and_false() -> None:
    stored = hash_password("s3cret", FAST)
    assert verify_password("s3cret", stored, FAST) is True
    assert verify_password("s3cret ", stored, FAST) is False
    assert verify_password("S3cret", stored, FAST) is False
    assert verify_password("", stored, FAST) is False


def test_salt_makes_each_hash_different() -> None:
    first, second = hash_password("same", FAST), hash_password("same", FAST)
    assert first != second
    assert verify_password("same", first, FAST)
    assert verify_password("same", second, FAST)


@pytest.mark.parametrize(
    "garbage",
    [
        "",
        "not a hash",
        "$argon2id$v=19$m=8,t=1,p=1$",
        "$2b$12$abcdefghijklmnopqrstuv",
        "$argon2id$",
    ],
)
def test_verify_never_raises_for_invalid_hash(garbage: str) -> None:
    assert verify_password("anything", garbage, FAST) is False


def test_verify_fails_for_tampered_hash() -> None:
    stored = hash_password("pw", FAST)
    digest_start = stored.rindex("$") + 1
    flipped = "A" if stored[digest_start] != "A" else "B"
    tampered = stored[:digest_start] + flipped + stored[digest_start + 1 :]
    assert verify_password("pw", tampered, FAST) is False


def test_hash_from_older_policy_still_verifies_under_new_one() -> None:
    stored = hash_password("pw", FAST)
    stronger = PasswordPolicy(time_cost=2, memory_cost=16, parallelism=1)
    assert verify_password("pw", stored, stronger)


@pytest.mark.parametrize(
    "changed",
    [
        PasswordPolicy(time_cost=2, memory_cost=8, parallelism=1),
        PasswordPolicy(time_cost=1, memory_cost=16, parallelism=1),
        PasswordPolicy(time_cost=1, memory_cost=16, parallelism=2),
    ],
)
def test_needs_rehash_when_cost_changes(changed: PasswordPolicy) -> None:
    stored = hash_password("pw", FAST)
    assert needs_rehash(stored, FAST) is False
    assert needs_rehash(stored, changed) is True
    upgraded = hash_password("pw", changed)
    assert needs_rehash(upgraded, changed) is False
    assert verify_password("pw", upgraded, changed)


def test_needs_rehash_for_other_argon2_variant() -> None:
    argon2i = PasswordHasher(time_cost=1, memory_cost=8, parallelism=1, type=Type.I).hash("pw")
    assert verify_password("pw", argon2i, FAST)
    assert needs_rehash(argon2i, FAST) is True


def test_needs_rehash_for_garbage() -> None:
    assert needs_rehash("not a hash", FAST) is True


@settings(max_examples=25)
@given(st.text(max_size=64), st.text(max_size=64))
def test_only_the_same_password_verifies(password: str, other: str) -> None:
    stored = hash_password(password, FAST)
    assert verify_password(password, stored, FAST)
    assert verify_password(other, stored, FAST) is (other == password)
