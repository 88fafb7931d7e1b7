"""The rule every new password meets, in all three systems: long enough, not absurdly long, not
one of the most common passwords, not the account's own name.

Lengths count code points (``len`` of the string), after NFC normalization, so a password typed
with combining accents on one keyboard and precomposed letters on another is the same length.
The common-password list is ``data/common-passwords.txt.gz`` (see ``data/NOTICE.md`` for its
source and licence), compared case-insensitively. It is read once per process, on first use.
"""

from __future__ import annotations

import functools
import gzip
import unicodedata
from collections.abc import Iterable
from importlib import resources

__all__ = [
    "MAX_LENGTH",
    "MIN_LENGTH",
    "WeakPassword",
    "check_new_password",
    "common_passwords",
    "shipped_list",
]

MIN_LENGTH = 12
MAX_LENGTH = 1024
_LIST = "common-passwords.txt.gz"


class WeakPassword(ValueError):
    """A new password the policy refuses. ``reason`` is a stable code, the message a sentence
    for the person choosing it (it never repeats the password)."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message


def _fold(text: str) -> str:
    return unicodedata.normalize("NFC", text).casefold()


def shipped_list() -> list[str]:
    """Every entry of the shipped list, in its order (most common first)."""
    raw = resources.files("platformkit").joinpath("data", _LIST).read_bytes()
    return [line for line in gzip.decompress(raw).decode("utf-8").splitlines() if line]


@functools.cache
def common_passwords() -> frozenset[str]:
    """The folded entries that can matter: those at least ``MIN_LENGTH`` long (a shorter one is
    refused for its length already), so the set stays small in every worker."""
    return frozenset(f for f in map(_fold, shipped_list()) if len(f) >= MIN_LENGTH)


def _inputs(user_inputs: Iterable[str]) -> set[str]:
    found: set[str] = set()
    for value in user_inputs:
        folded = _fold(value)
        if folded:
            found.add(folded)
            local, at, _domain = folded.rpartition("@")
            if at and local:
                found.add(local)
    return found


def check_new_password(password: str, *, user_inputs: Iterable[str] = ()) -> None:
    """Raise :class:`WeakPassword` unless ``password`` may be chosen.

    ``user_inputs`` are the account's own names (username, email): the password may not equal
    one of them, nor an email's part before the ``@``, ignoring case.
    """
    normalized = unicodedata.normalize("NFC", password)
    if len(normalized) < MIN_LENGTH:
        raise WeakPassword("too_short", f"Passwords need at least {MIN_LENGTH} characters.")
    if len(normalized) > MAX_LENGTH:
        raise WeakPassword("too_long", f"Passwords may have at most {MAX_LENGTH} characters.")
    folded = normalized.casefold()
    if folded in common_passwords():
        raise WeakPassword("common", "This is one of the most common passwords; choose another.")
    if folded in _inputs(user_inputs):
        raise WeakPassword("matches_account", "The password may not be the account's own name.")
