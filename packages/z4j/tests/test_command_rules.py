"""The command rules (``z4j.domain.commands``), checked against the parties that read them:
Celery parses every rate the brain accepts, and the z4j-celery agent's own purge check accepts
the brain's purge confirmation."""

from __future__ import annotations

import pytest
from celery.utils.time import rate as celery_rate
from hypothesis import given
from hypothesis import strategies as st
from z4j.domain import commands as rules
from z4j_core.purge_token import verify_purge_confirm_token


@given(st.from_regex(r"\A[0-9]{1,4}(\.[0-9]{1,3})?(/[smh])?\Z"))
def test_every_accepted_rate_is_one_celery_parses(text: str) -> None:
    assert rules.check_rate(text) == text
    assert celery_rate(text) >= 0


@pytest.mark.parametrize("text", ["", "fast", "10/d", "-1/m", "1e9/s", "10 /m", "10/m\n"])
def test_other_rates_are_refused(text: str) -> None:
    with pytest.raises(rules.CommandRuleError):
        rules.check_rate(text)


@given(
    secret=st.binary(min_size=32, max_size=32),
    queue=st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1),
    depth=st.integers(min_value=0, max_value=2**31 - 1),
)
def test_the_purge_confirmation_is_the_one_z4j_celery_checks(
    secret: bytes, queue: str, depth: int
) -> None:
    token = rules.purge_confirm_token(secret, queue, depth)
    accepted, legacy = verify_purge_confirm_token(
        provided=token, queue_name=queue, queue_depth=depth, secret=secret, accept_legacy=False
    )
    assert accepted
    assert not legacy
    other, _ = verify_purge_confirm_token(
        provided=token, queue_name=queue, queue_depth=depth + 1, secret=secret, accept_legacy=False
    )
    assert not other


@given(st.dictionaries(st.text(max_size=8), st.lists(st.text(max_size=12), max_size=5)))
def test_advertised_means_listed_under_some_engine(capabilities: dict[str, list[str]]) -> None:
    for action in rules.ACTIONS:
        expected = any(action in listed for listed in capabilities.values())
        assert rules.advertised(capabilities, action) is expected
        for engine in capabilities:
            assert rules.advertised(capabilities, action, engine) is (
                action in capabilities[engine]
            )


@pytest.mark.parametrize(
    ("reported", "status"),
    [("success", "succeeded"), ("succeeded", "succeeded"), ("failed", "failed"),
     ("error", "failed"), ("done", None), (None, None), (1, None)],
)  # fmt: skip
def test_result_status(reported: object, status: str | None) -> None:
    assert rules.result_status(reported) == status
