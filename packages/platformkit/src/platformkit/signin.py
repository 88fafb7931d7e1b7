"""Sign-in throttling per account and per source address, with exponential back-off, kept in a
table of the system's own database so every worker and every instance sees the same counts.

Order of events for one sign-in (the system's login action)::

    wait = await throttle.check(pool, account, source)   # before any password work
    if wait is not None: raise <the system's 429 problem>(Retry-After: wait)
    ... verify_password_or_dummy(...) ...
    on failure: record = await throttle.failure(pool, account, source); audit it; answer 401
    on success: await throttle.success(pool, account)

Each key (the account name as typed, folded; the source address, an IPv6 one by its /64) counts
its failures; once a key has ``threshold`` failures it is locked for ``base``, doubling with
every further failure up to ``cap``. A sign-in asked while either key is locked is refused
without checking the password, so the right password is refused too until the lock ends.
Success clears the account's count, never the source's (signing in to one's own account must
not buy more guesses at others). A key unused for ``forget_after`` starts again from zero.

Keys are stored as SHA-256 digests: the table never holds what someone typed as a username.
Times come from the database clock. The table (one per system, named by the caller)::

    CREATE TABLE sign_in_throttle (
        key_hash        bytea       PRIMARY KEY,
        failures        integer     NOT NULL,
        locked_until    timestamptz,
        last_failure_at timestamptz NOT NULL
    );
    CREATE INDEX sign_in_throttle_last_failure ON sign_in_throttle (last_failure_at);
"""

from __future__ import annotations

import hashlib
import ipaddress
import unicodedata
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from psycopg import sql

from platformkit.db.scope import Pool, transaction

__all__ = ["Backoff", "Failure", "SignInThrottle", "account_key", "source_key"]


@dataclass(frozen=True)
class Backoff:
    """Locks after ``threshold`` failures: ``base``, doubling per further failure, at most
    ``cap``."""

    threshold: int = 5
    base: timedelta = timedelta(seconds=1)
    cap: timedelta = timedelta(minutes=15)

    def __post_init__(self) -> None:
        if self.threshold < 1 or self.base <= timedelta(0) or self.cap < self.base:
            raise ValueError("need threshold >= 1 and 0 < base <= cap")

    def lockout(self, failures: int) -> timedelta | None:
        """How long ``failures`` consecutive failures lock the key (None: not locked)."""
        if failures < self.threshold:
            return None
        doublings = failures - self.threshold
        # Past 2**40 the cap has long been reached; do not build huge integers.
        if doublings >= 40:
            return self.cap
        lock: timedelta = self.base * (2**doublings)
        return min(self.cap, lock)


ACCOUNT = Backoff()
# A source address is shared by everyone behind one NAT: more room before it locks.
SOURCE = Backoff(threshold=20)
FORGET_AFTER = timedelta(hours=24)
# Rows a failure deletes among those not used for FORGET_AFTER, so the table stays bounded.
_PURGE_BATCH = 100


@dataclass(frozen=True)
class Failure:
    """What one failed sign-in did to its two keys, for the caller's audit log."""

    account_failures: int
    source_failures: int
    account_lockout: timedelta | None
    source_lockout: timedelta | None

    @property
    def locked(self) -> bool:
        return self.account_lockout is not None or self.source_lockout is not None

    def details(self) -> dict[str, Any]:
        """The audit details: counts and lock lengths in whole seconds (null: not locked)."""

        def seconds(lock: timedelta | None) -> int | None:
            return None if lock is None else int(lock.total_seconds())

        return {
            "account_failures": self.account_failures,
            "source_failures": self.source_failures,
            "account_locked_seconds": seconds(self.account_lockout),
            "source_locked_seconds": seconds(self.source_lockout),
        }


def account_key(account: str) -> bytes:
    """The stored key of an account name as typed (NFC, case-folded, trimmed)."""
    folded = unicodedata.normalize("NFC", account).strip().casefold()
    return hashlib.sha256(b"account\x00" + folded.encode("utf-8", "surrogatepass")).digest()


def source_key(source: str | None) -> bytes:
    """The stored key of a client address; an IPv6 address counts by its /64 network, since
    one host commonly holds a whole /64."""
    text = source or "unknown"
    try:
        address = ipaddress.ip_address(text)
    except ValueError:
        pass
    else:
        if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
            text = str(address.ipv4_mapped)
        elif isinstance(address, ipaddress.IPv6Address):
            text = str(ipaddress.ip_network(f"{address}/64", strict=False))
    return hashlib.sha256(b"source\x00" + text.encode()).digest()


_WAIT = """
SELECT ceil(extract(epoch FROM max(locked_until) - now()))::integer AS wait
FROM {table} WHERE key_hash = ANY(%(keys)s) AND locked_until > now()
"""
_COUNT = """
INSERT INTO {table} AS held (key_hash, failures, last_failure_at)
VALUES (%(key)s, 1, now())
ON CONFLICT (key_hash) DO UPDATE SET
    failures = CASE WHEN held.last_failure_at < now() - %(forget)s THEN 1
                    ELSE least(held.failures, 1000000) + 1 END,
    last_failure_at = now()
RETURNING failures
"""
_LOCK = "UPDATE {table} SET locked_until = now() + %(lock)s WHERE key_hash = %(key)s"
_CLEAR = "DELETE FROM {table} WHERE key_hash = %(key)s"
_PURGE = """
DELETE FROM {table} WHERE ctid = ANY (ARRAY(
    SELECT ctid FROM {table} WHERE last_failure_at < now() - %(forget)s
        AND (locked_until IS NULL OR locked_until < now())
    LIMIT %(limit)s))
"""


def _qualified(table: str) -> sql.Composable:
    return sql.SQL(".").join(sql.Identifier(part) for part in table.split("."))


class SignInThrottle:
    """Throttling state in ``table`` (``"schema.table"`` or a name on the search path), reached
    through the pool given to each call (the system's application pool)."""

    def __init__(
        self,
        table: str,
        *,
        account: Backoff = ACCOUNT,
        source: Backoff = SOURCE,
        forget_after: timedelta = FORGET_AFTER,
    ) -> None:
        if forget_after < max(account.cap, source.cap):
            raise ValueError("forget_after must outlast the longest lock")
        self.table = _qualified(table)
        self.account = account
        self.source = source
        self.forget_after = forget_after

    def _sql(self, text: str) -> sql.Composed:
        return sql.SQL(text).format(table=self.table)

    async def check(self, pool: Pool, account: str, source: str | None) -> int | None:
        """Seconds until this sign-in may be tried (for ``Retry-After``), or None if now."""
        keys = [account_key(account), source_key(source)]
        async with transaction(pool) as conn:
            cur = await conn.execute(self._sql(_WAIT), {"keys": keys})
            row = await cur.fetchone()
        wait = row["wait"] if row is not None else None
        return None if wait is None else max(1, int(wait))

    async def failure(self, pool: Pool, account: str, source: str | None) -> Failure:
        """Count a failed sign-in against both keys, locking those past their threshold."""
        counted: list[tuple[int, timedelta | None]] = []
        async with transaction(pool) as conn:
            for key, backoff in (
                (account_key(account), self.account),
                (source_key(source), self.source),
            ):
                cur = await conn.execute(
                    self._sql(_COUNT), {"key": key, "forget": self.forget_after}
                )
                row = await cur.fetchone()
                failures = int(row["failures"]) if row is not None else 1
                lock = backoff.lockout(failures)
                if lock is not None:
                    await conn.execute(self._sql(_LOCK), {"key": key, "lock": lock})
                counted.append((failures, lock))
            await conn.execute(
                self._sql(_PURGE), {"forget": self.forget_after, "limit": _PURGE_BATCH}
            )
        (account_failures, account_lock), (source_failures, source_lock) = counted
        return Failure(account_failures, source_failures, account_lock, source_lock)

    async def success(self, pool: Pool, account: str) -> None:
        """A successful sign-in: the account starts again from zero."""
        async with transaction(pool) as conn:
            await conn.execute(self._sql(_CLEAR), {"key": account_key(account)})
