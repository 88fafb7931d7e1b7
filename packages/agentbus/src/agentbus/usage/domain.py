"""What a usage record costs and how far to trust it (data model §2.4): pure functions.

Token counts follow one convention whatever the harness (the adapters convert, 08-HARNESS-
ADAPTERS.md "Usage"): ``input_tokens`` excludes the cached tokens, which are
``cache_read_tokens`` and ``cache_write_tokens``; ``reasoning_tokens`` are part of
``output_tokens``, billed at the output price, never added twice.

``assess`` decides the stored ``cost_usd``, ``cost_source`` and ``confidence``:

- a cost the harness reported (``cost_source = 'harness_reported'`` with ``cost_usd``) is kept;
- otherwise, with a ``model_pricing`` row for the model on the record's day, the cost is computed
  from the tokens (``computed``);
- otherwise the reported cost, or 0, is stored as an ``estimate``, ``unverified``.

Confidence starts from who reported the tokens (``harness`` and ``proxy`` observed them:
``exact``; ``estimate`` counted them approximately: ``approximate``; ``agent`` said so itself:
``unverified``) and is never above what the uploader claimed, nor above ``unverified`` for an
estimate: an uploader may lower it, never raise it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date
from decimal import ROUND_HALF_UP, Decimal

PROVIDERS = ("anthropic", "openai", "google", "other")
COST_SOURCES = ("computed", "harness_reported", "estimate")
REPORTERS = ("harness", "proxy", "agent", "estimate")
CONFIDENCES = ("exact", "approximate", "unverified")  # most to least trusted
COST_MAX = Decimal("99999999.999999")  # numeric(14, 6)
MICRO = Decimal("0.000001")
MILLION = Decimal(1_000_000)

_BY_REPORTER = {
    "harness": "exact", "proxy": "exact", "estimate": "approximate", "agent": "unverified"
}  # fmt: skip
_DATE_SUFFIX = re.compile(r"(?:[-@](?:\d{8}|\d{4}-\d{2}-\d{2})|-latest)$")
_PREFIX = re.compile(r"^(?:models/|anthropic/|openai/|google/|gemini/)")


@dataclass(frozen=True)
class Tokens:
    input: int = 0
    output: int = 0
    cache_read: int = 0
    cache_write: int = 0


@dataclass(frozen=True)
class Price:
    """A ``model_pricing`` row: USD per million tokens from ``effective_from``."""

    effective_from: date
    input: Decimal
    output: Decimal
    cache_read: Decimal
    cache_write: Decimal


@dataclass(frozen=True)
class Assessment:
    cost_usd: Decimal
    cost_source: str
    confidence: str


def model_key(model: str) -> str:
    """The name ``model_pricing`` keeps a model under: lowercase, without a provider path
    (``models/``, ``anthropic/``) or a release date (``-20250929``, ``@20250929``,
    ``-2025-08-07``, ``-latest``)."""
    return _DATE_SUFFIX.sub("", _PREFIX.sub("", model.strip().lower()))


def price_on(prices: Sequence[Price], day: date) -> Price | None:
    """The row in force on ``day``: the latest ``effective_from`` not after it."""
    due = [p for p in prices if p.effective_from <= day]
    return max(due, key=lambda p: p.effective_from) if due else None


def token_cost(tokens: Tokens, price: Price) -> Decimal:
    """USD for ``tokens`` at ``price``, rounded to the micro-dollar, capped to what is stored."""
    total = (
        tokens.input * price.input
        + tokens.output * price.output
        + tokens.cache_read * price.cache_read
        + tokens.cache_write * price.cache_write
    ) / MILLION
    return min(total.quantize(MICRO, rounding=ROUND_HALF_UP), COST_MAX)


def least_trusted(*levels: str) -> str:
    return max(levels, key=CONFIDENCES.index)


def assess(
    tokens: Tokens,
    *,
    reported_by: str,
    claimed_confidence: str,
    reported_cost: Decimal | None,
    cost_source: str | None,
    price: Price | None,
) -> Assessment:
    """The stored cost, its source and confidence (module docstring)."""
    trust = least_trusted(_BY_REPORTER[reported_by], claimed_confidence)
    if cost_source == "harness_reported" and reported_cost is not None:
        return Assessment(reported_cost, "harness_reported", trust)
    if price is not None:
        return Assessment(token_cost(tokens, price), "computed", trust)
    return Assessment(reported_cost or Decimal(0), "estimate", "unverified")
