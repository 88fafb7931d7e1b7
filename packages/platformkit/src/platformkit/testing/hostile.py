"""Hostile variants of a valid request body, for the suites that send each one to a route and
check it is refused with a 4xx (never a 5xx) and stores nothing.

Each case is ``(label, body, must)``: ``must`` says whether the route has to refuse it; a case
that may be valid for its field (empty or over-long text, a mistyped value, a large number in
a form) only has to be answered without a 5xx (``assert_answered``). The suites add the cases of
their own routes.
"""

from __future__ import annotations

import json
from typing import Any

import httpx

__all__ = ["DEEP", "HUGE", "Case", "assert_answered", "form_cases", "json_cases"]

DEEP = 100_000  # nesting depth of the deep JSON cases
HUGE = 30 << 20  # bytes: a body well over every route's limit

type Case = tuple[str, bytes, bool]


def json_cases(fields: dict[str, Any], *, mistyped_refused: bool = False) -> list[Case]:
    """The hostile variants of the JSON body ``fields``: NUL and a lone surrogate, empty and
    over-long text in each text field; 2**70, -2**70 and a wrong type in each field (the wrong
    type refused if ``mistyped_refused``); NUL and 2**70 inside a list, a NUL key and a lone
    surrogate inside an object; JSON nested ``DEEP`` levels in the first field."""
    cases: list[Case] = []
    for name, value in fields.items():

        def put(v: object, name: str = name) -> bytes:
            return json.dumps({**fields, name: v}).encode()

        if isinstance(value, str):
            cases += [
                (f"nul in {name}", put("a\u0000b"), True),
                (f"surrogate in {name}", put("a\ud800b"), True),
                (f"empty {name}", put(""), False),
                (f"over-long {name}", put("x" * 100_000), False),
            ]
        cases += [
            (f"2**70 in {name}", put(2**70), True),
            (f"-2**70 in {name}", put(-(2**70)), True),
            (f"wrong type in {name}", put({"x": [1]}), mistyped_refused),
        ]
        if isinstance(value, list):
            cases += [
                (f"nul inside {name}", put(["a\u0000b"]), True),
                (f"2**70 inside {name}", put([2**70]), True),
            ]
        if isinstance(value, dict):
            cases += [
                (f"nul key inside {name}", put({"a\u0000": 1}), True),
                (f"surrogate inside {name}", put({"a": "\udc00"}), True),
            ]
    first = next(iter(fields))
    deep = b"[" * DEEP + b"]" * DEEP
    body = json.dumps({**fields, first: "D"}).encode().replace(b'"D"', deep)
    cases.append((f"deep in {first}", body, True))
    return cases


def form_cases(fields: dict[str, str]) -> list[Case]:
    """The hostile variants of the form body ``fields`` (URL-encoded): NUL and a lone surrogate
    (as its UTF-8 bytes) in each field, refused; empty and over-long text, 2**70 and -2**70 as
    text, answered without a 5xx."""
    cases: list[Case] = []
    for name in fields:

        def put(v: str, name: str = name) -> bytes:
            return str(httpx.QueryParams({**fields, name: v})).encode()

        cases += [
            (f"nul in {name}", put("a\x00b"), True),
            (f"surrogate in {name}", put("S").replace(b"=S", b"=a%ED%A0%80b"), True),
            (f"empty {name}", put(""), False),
            (f"over-long {name}", put("x" * 100_000), False),
            (f"2**70 in {name}", put(str(2**70)), False),
            (f"-2**70 in {name}", put(str(-(2**70))), False),
        ]
    return cases


def assert_answered(label: str, answer: httpx.Response, must: bool) -> None:
    """The answer to the case ``label`` is no 5xx, and a 4xx if the case ``must`` be refused."""
    assert answer.status_code < 500, (label, answer.status_code, answer.text[:300])
    if must:
        assert 400 <= answer.status_code < 500, (label, answer.status_code, answer.text[:300])
