"""The new-password rule: length in code points, the shipped common list, the account's names."""

from __future__ import annotations

from random import Random

import pytest
from hypothesis import given
from hypothesis import strategies as st
from platformkit.password_rules import (
    MAX_LENGTH,
    MIN_LENGTH,
    WeakPassword,
    check_new_password,
    common_passwords,
    shipped_list,
)

LONG_ENOUGH = st.text(min_size=MIN_LENGTH, max_size=80).filter(
    lambda p: p.casefold() not in common_passwords()
)


def reason(password: str, **kwargs: tuple[str, ...]) -> str | None:
    try:
        check_new_password(password, **kwargs)
    except WeakPassword as exc:
        return exc.reason
    return None


def test_the_shipped_list_has_at_least_ten_thousand_entries() -> None:
    entries = shipped_list()
    assert len(entries) >= 10_000
    assert entries[:2] == ["123456", "password"]
    assert len(common_passwords()) > 400


@given(st.text(max_size=MIN_LENGTH - 1))
def test_shorter_than_the_minimum_is_refused(password: str) -> None:
    assert reason(password) == "too_short"


@given(st.text(alphabet=st.characters(codec="utf-8"), min_size=MIN_LENGTH, max_size=MIN_LENGTH))
def test_length_counts_code_points_not_bytes(password: str) -> None:
    assert reason(password) in (None, "common")


@given(LONG_ENOUGH)
def test_anything_long_enough_and_uncommon_is_accepted(password: str) -> None:
    assert reason(password) is None


def test_the_upper_limit_is_far_above_256() -> None:
    assert MAX_LENGTH >= 256
    assert reason("x" * 256 + "y") is None
    assert reason("ab" * (MAX_LENGTH // 2)) is None
    assert reason("a" * (MAX_LENGTH + 1)) == "too_long"


@given(st.sampled_from(sorted(common_passwords())), st.randoms())
def test_every_long_common_password_is_refused_in_any_case(entry: str, rnd: Random) -> None:
    variant = "".join(c.upper() if rnd.random() < 0.5 else c for c in entry)
    assert reason(variant) == "common"


@pytest.mark.parametrize("password", ["1234567890", "password12", "", "b", "a" * 11])
def test_known_weak_passwords_are_refused(password: str) -> None:
    assert reason(password) == "too_short"


@pytest.mark.parametrize("password", ["qwerty123456", "QWERTY123456", "1q2w3e4r5t6y"])
def test_common_twelve_character_passwords_are_refused(password: str) -> None:
    assert reason(password) == "common"


@given(LONG_ENOUGH)
def test_the_account_name_is_refused(name: str) -> None:
    assert reason(name, user_inputs=(name,)) == "matches_account"
    assert reason(name, user_inputs=(name + "@example.com",)) == "matches_account"


def test_the_local_part_of_an_email_is_refused() -> None:
    inputs = ("Operations.Team@example.com",)
    assert reason("operations.team", user_inputs=inputs) == "matches_account"
    assert reason("OPERATIONS.TEAM", user_inputs=inputs) == "matches_account"
    assert reason("operations.team@example.com", user_inputs=inputs) == "matches_account"
    assert reason("operations.team1", user_inputs=inputs) is None


def test_the_message_is_a_sentence_for_people() -> None:
    with pytest.raises(WeakPassword, match="at least 12 characters"):
        check_new_password("short")
