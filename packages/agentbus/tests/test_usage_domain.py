"""The cost rules of usage records (``agentbus.usage.domain``): model names, the price in force,
and properties of ``assess`` over random records."""

from __future__ import annotations

from datetime import date
from decimal import Decimal

import pytest
from agentbus.usage.domain import (
    CONFIDENCES,
    COST_MAX,
    REPORTERS,
    Price,
    Tokens,
    assess,
    model_key,
    price_on,
    token_cost,
)
from hypothesis import given
from hypothesis import strategies as st

SONNET = Price(date(2025, 9, 29), Decimal(3), Decimal(15), Decimal("0.3"), Decimal("3.75"))
counts = st.integers(min_value=0, max_value=2**63 - 1)
tokens = st.builds(Tokens, counts, counts, counts, counts)


@pytest.mark.parametrize(
    ("model", "key"),
    [
        ("claude-sonnet-4-5-20250929", "claude-sonnet-4-5"),
        ("claude-sonnet-4-5@20250929", "claude-sonnet-4-5"),
        ("models/gemini-2.5-pro", "gemini-2.5-pro"),
        ("gpt-4.1-2025-04-14", "gpt-4.1"),
        ("GPT-5", "gpt-5"),
        ("claude-3-5-haiku-latest", "claude-3-5-haiku"),
        ("gpt-5-codex", "gpt-5-codex"),
    ],
)
def test_model_key(model: str, key: str) -> None:
    assert model_key(model) == key


def test_the_price_in_force_is_the_latest_not_after_the_day() -> None:
    cheaper = Price(date(2026, 1, 1), Decimal(1), Decimal(5), Decimal("0.1"), Decimal(1))
    assert price_on([SONNET, cheaper], date(2025, 12, 31)) is SONNET
    assert price_on([SONNET, cheaper], date(2026, 1, 1)) is cheaper
    assert price_on([SONNET], date(2025, 1, 1)) is None


@given(tokens, tokens)
def test_cost_is_bounded_and_grows_with_tokens(a: Tokens, b: Tokens) -> None:
    cost = token_cost(a, SONNET)
    assert Decimal(0) <= cost <= COST_MAX
    assert cost == cost.quantize(Decimal("0.000001"))
    more = Tokens(a.input + b.input, a.output + b.output, a.cache_read + b.cache_read,
                  a.cache_write + b.cache_write)  # fmt: skip
    assert token_cost(more, SONNET) >= cost


@given(
    tokens,
    st.sampled_from(REPORTERS),
    st.sampled_from(CONFIDENCES),
    st.none() | st.decimals(min_value=0, max_value=COST_MAX, places=6),
    st.sampled_from([None, "computed", "harness_reported", "estimate"]),
    st.booleans(),
)
def test_an_uploader_never_raises_confidence(
    t: Tokens,
    reporter: str,
    claimed: str,
    cost: Decimal | None,
    source: str | None,
    priced: bool,
) -> None:
    verdict = assess(t, reported_by=reporter, claimed_confidence=claimed, reported_cost=cost,
                     cost_source=source, price=SONNET if priced else None)  # fmt: skip
    rank = CONFIDENCES.index
    assert rank(verdict.confidence) >= rank(claimed)
    if reporter == "agent" or not (priced or (source == "harness_reported" and cost is not None)):
        assert verdict.confidence == "unverified"
    if verdict.cost_source == "computed":
        assert verdict.cost_usd == token_cost(t, SONNET)
    assert verdict.cost_usd >= 0
