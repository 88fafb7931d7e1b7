"""Sign-in throttling: the back-off rule, and the counts kept in PostgreSQL."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path

import psycopg
import pytest
from hypothesis import given
from hypothesis import strategies as st
from platformkit.db.migrator import Migrator, load_directory
from platformkit.db.pool import open_pool, with_user
from platformkit.db.roles import RoleSpec
from platformkit.db.scope import Pool
from platformkit.passwords import (
    FAST_TEST_POLICY,
    hash_password,
    verify_password_or_dummy,
)
from platformkit.signin import Backoff, SignInThrottle, account_key, source_key
from platformkit.testing.signin import unknown_account_checks

MIGRATIONS = Path(__file__).parent / "signin_migrations"
TABLE = "signinkit.sign_in_throttle"
RULE = Backoff()


@given(st.integers(min_value=0, max_value=10**9))
def test_no_lock_below_the_threshold_then_base_doubling_to_the_cap(failures: int) -> None:
    lock = RULE.lockout(failures)
    if failures < RULE.threshold:
        assert lock is None
        return
    assert lock is not None
    assert RULE.base <= lock <= RULE.cap
    expected = RULE.base * 2 ** min(failures - RULE.threshold, 20)
    assert lock == min(expected, RULE.cap)


@given(st.integers(min_value=0, max_value=10**6))
def test_lock_never_shrinks_with_more_failures(failures: int) -> None:
    zero = timedelta(0)
    assert (RULE.lockout(failures) or zero) <= (RULE.lockout(failures + 1) or zero)


def test_the_documented_parameters() -> None:
    assert (RULE.threshold, RULE.base, RULE.cap) == (5, timedelta(seconds=1), timedelta(minutes=15))
    assert RULE.lockout(5) == timedelta(seconds=1)
    assert RULE.lockout(6) == timedelta(seconds=2)
    assert RULE.lockout(15) == timedelta(minutes=15)


@given(st.text(max_size=40))
def test_account_keys_ignore_case_and_surrounding_space(name: str) -> None:
    assert account_key(f" {name.upper()} ") == account_key(name.upper())
    assert account_key(name) != source_key(name)


def test_an_ipv6_source_counts_by_its_64_network() -> None:
    assert source_key("2001:db8:1:2::1") == source_key("2001:db8:1:2:ffff::9")
    assert source_key("2001:db8:1:2::1") != source_key("2001:db8:1:3::1")
    assert source_key("::ffff:192.0.2.7") == source_key("192.0.2.7")
    assert source_key("192.0.2.7") != source_key("192.0.2.8")


def test_an_unknown_account_costs_a_real_verification() -> None:
    before = unknown_account_checks()
    assert verify_password_or_dummy(None, "anything at all", FAST_TEST_POLICY) is False
    assert unknown_account_checks() == before + 1
    stored = hash_password("the right one", FAST_TEST_POLICY)
    assert verify_password_or_dummy(stored, "the right one", FAST_TEST_POLICY) is True
    assert verify_password_or_dummy(stored, "a wrong one", FAST_TEST_POLICY) is False


@pytest.fixture
async def pool(fresh_database: str) -> AsyncIterator[Pool]:
    migrator = Migrator(
        system="kit_signin",
        sources=[load_directory("kit_signin", MIGRATIONS)],
        roles=RoleSpec(owner="kit_owner", app="kit_app"),
    )
    await migrator.migrate(fresh_database)
    pool = await open_pool(with_user(fresh_database, "kit_app"), min_size=1, max_size=4)
    yield pool
    await pool.close()


LONG = Backoff(threshold=5, base=timedelta(minutes=1), cap=timedelta(minutes=15))


async def test_five_failures_lock_the_account_and_success_clears_it(pool: Pool) -> None:
    throttle = SignInThrottle(TABLE, account=LONG, source=Backoff(threshold=50))
    for n in range(1, 5):
        record = await throttle.failure(pool, "Alice", "192.0.2.1")
        assert (record.account_failures, record.locked) == (n, False)
        assert await throttle.check(pool, "alice", "192.0.2.1") is None
    record = await throttle.failure(pool, "alice", "192.0.2.1")
    assert record.account_lockout == timedelta(minutes=1)
    assert record.locked
    assert record.details()["account_locked_seconds"] == 60
    wait = await throttle.check(pool, "ALICE", "198.51.100.9")
    assert wait is not None
    assert 50 <= wait <= 60
    assert await throttle.check(pool, "bob", "192.0.2.1") is None
    await throttle.success(pool, "alice")
    assert await throttle.check(pool, "alice", "192.0.2.1") is None
    assert (await throttle.failure(pool, "alice", "192.0.2.1")).account_failures == 1


async def test_one_source_guessing_many_accounts_is_locked(pool: Pool) -> None:
    throttle = SignInThrottle(TABLE, account=LONG, source=Backoff(threshold=3, base=LONG.base))
    for name in ("a", "b"):
        assert not (await throttle.failure(pool, name, "2001:db8::1")).locked
    record = await throttle.failure(pool, "c", "2001:db8::2")
    assert record.source_lockout == LONG.base
    assert record.account_lockout is None
    assert await throttle.check(pool, "d", "2001:db8::3") is not None
    assert await throttle.check(pool, "d", "2001:db8:0:1::3") is None
    await throttle.success(pool, "c")
    assert await throttle.check(pool, "d", "2001:db8::3") is not None


async def test_keys_are_stored_hashed_and_old_rows_are_purged(
    pool: Pool, fresh_database: str
) -> None:
    throttle = SignInThrottle(TABLE)
    await throttle.failure(pool, "someone@example.com", "192.0.2.1")
    with psycopg.connect(fresh_database, autocommit=True) as conn:
        stored = {bytes(r[0]) for r in conn.execute(f"SELECT key_hash FROM {TABLE}")}
        assert stored == {account_key("someone@example.com"), source_key("192.0.2.1")}
        conn.execute(f"UPDATE {TABLE} SET last_failure_at = now() - interval '2 days'")
    assert (await throttle.failure(pool, "other", "192.0.2.2")).account_failures == 1
    with psycopg.connect(fresh_database, autocommit=True) as conn:
        left = {bytes(r[0]) for r in conn.execute(f"SELECT key_hash FROM {TABLE}")}
    assert left == {account_key("other"), source_key("192.0.2.2")}


def test_forgetting_must_outlast_the_longest_lock() -> None:
    with pytest.raises(ValueError, match="outlast"):
        SignInThrottle(TABLE, forget_after=timedelta(minutes=1))
