"""Schema-driven requests against an app in this process: schemathesis generates requests from
the app's own OpenAPI document (valid ones and ones that break it), the test sends them through
its httpx client, and each answer must be no 5xx and conform to the document (status, media type
and schema of the documented response).

Deterministic and bounded: hypothesis derandomized, a fixed number of examples per operation and
generation mode, no shrinking. Generation is done before any request is sent, so it runs outside
the app's event loop and the requests share the test's.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import httpx
import hypothesis
import schemathesis
from hypothesis import HealthCheck, Phase
from schemathesis import Case, GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.core.failures import Failure, FailureGroup
from schemathesis.core.result import Err
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

__all__ = ["Fuzzed", "generate", "send"]

# Agents post newline-delimited JSON (Vector's http sink); its documented body is a string, sent
# as text is.
schemathesis.serializer.alias("application/x-ndjson", "text/plain")

CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
]


@dataclass
class Fuzzed:
    """What a run found: each failure as one line, and how many requests it sent."""

    sent: int
    failures: list[str]


def generate(
    document: dict[str, Any],
    *,
    max_examples: int = 10,
    skip: Callable[[str, str], bool] = lambda _method, _path: False,
    modes: Iterable[GenerationMode] = (GenerationMode.POSITIVE, GenerationMode.NEGATIVE),
) -> list[Case[Any]]:
    """Up to ``max_examples`` cases per operation and mode, the same on every run."""
    schema = schemathesis.openapi.from_dict(document)
    cases: list[Case[Any]] = []
    for result in schema.get_all_operations():
        if isinstance(result, Err):
            raise result.err()  # the document itself is wrong: say so
        operation = result.ok()
        if skip(operation.method.upper(), operation.path) or _upgrade(operation.definition.raw):
            continue
        for mode in modes:

            @hypothesis.settings(
                max_examples=max_examples,
                derandomize=True,
                database=None,
                deadline=None,
                phases=[Phase.explicit, Phase.generate],
                suppress_health_check=list(HealthCheck),
            )
            @hypothesis.given(case=operation.as_strategy(generation_mode=mode))
            def collect(case: Case[Any]) -> None:
                cases.append(case)

            try:
                collect()
            except hypothesis.errors.Unsatisfiable:
                continue  # nothing to break in this mode (no parameters, no body)
    return cases


def _upgrade(operation: dict[str, Any]) -> bool:
    """A WebSocket, documented as the GET answered 101: its frames are not HTTP requests, and
    the hostile-frame suites of each agent protocol cover them."""
    return "101" in operation.get("responses", {})


def _request_kwargs(case: Case[Any], headers: dict[str, str]) -> dict[str, Any]:
    sent = case.as_transport_kwargs(headers=headers)
    kwargs: dict[str, Any] = {
        "method": sent["method"],
        "url": sent["url"],
        "headers": dict(sent.get("headers") or {}),
        "params": sent.get("params"),
    }
    if sent.get("cookies"):  # as the header: httpx keeps per-request cookies on the client
        cookies = "; ".join(f"{k}={v}" for k, v in sent["cookies"].items())
        kwargs["headers"]["Cookie"] = "; ".join(
            c for c in (kwargs["headers"].get("Cookie"), cookies) if c
        )
    if "json" in sent:
        kwargs["json"] = sent["json"]
    elif "data" in sent:
        data = sent["data"]
        kwargs["content" if isinstance(data, bytes | str) else "data"] = data
    if "files" in sent:
        kwargs["files"] = sent["files"]
    return kwargs


async def send(
    client: httpx.AsyncClient,
    cases: Iterable[Case[Any]],
    headers: Callable[[Case[Any]], dict[str, str]] = lambda _case: {},
) -> Fuzzed:
    """Send each case through ``client`` with the credentials ``headers`` gives it, and check
    its answer; a check that fails is one line: method, path, status, what failed."""
    sent, failures = 0, []
    for case in cases:
        kwargs = _request_kwargs(case, headers(case))
        kwargs["url"] = kwargs["url"].removeprefix(str(client.base_url).rstrip("/"))
        response = await client.request(**kwargs)
        sent += 1
        try:
            case.validate_response(response, checks=CHECKS)
        except (Failure, FailureGroup) as exc:
            found = exc.exceptions if isinstance(exc, FailureGroup) else (exc,)
            reason = "; ".join(" ".join(f"{f.title}: {f.message}".split())[:300] for f in found)
            failures.append(f"{case.method} {case.path} -> {response.status_code}: {reason}")
    return Fuzzed(sent, failures)
