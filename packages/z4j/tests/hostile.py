"""Hostile request bodies every new route must refuse with a 4xx, alone (never a 500)."""

from __future__ import annotations

import json
import re

import httpx

DEEP = 200


def bodies(fields: dict[str, object]) -> list[tuple[str, bytes]]:
    """For a valid JSON body: NUL in each text field, 2**70 in each field, a deep array in the
    first, and a body over the 1 MiB limit."""
    found: list[tuple[str, bytes]] = []
    for name, value in fields.items():
        if isinstance(value, str):
            found.append((f"nul in {name}", json.dumps({**fields, name: "a\u0000b"}).encode()))
        found.append((f"2**70 in {name}", json.dumps({**fields, name: 2**70}).encode()))
    first = next(iter(fields))
    deep = "[" * DEEP + "1" + "]" * DEEP
    raw = json.dumps({**fields, first: "DEEP"}).replace('"DEEP"', deep).encode()
    found.append((f"deep json in {first}", raw))
    found.append(("huge body", b'{"x": "' + b"x" * (2 << 20) + b'"}'))
    return found


async def assert_refused(
    http: httpx.AsyncClient, method: str, path: str, fields: dict[str, object]
) -> None:
    for label, body in bodies(fields):
        answer = await http.request(
            method, path, content=body, headers={"content-type": "application/json"}
        )
        assert 400 <= answer.status_code < 500, (label, path, answer.status_code, answer.text)
        assert answer.headers["content-type"].startswith("application/problem+json"), label


def form_token(html: str) -> str:
    found = re.search(r'name="csrf_token" value="([^"]+)"', html)
    assert found is not None, "no form token on the page"
    return found.group(1)


async def assert_form_refused(http: httpx.AsyncClient, path: str, fields: dict[str, str]) -> None:
    """The same for a dashboard form (with its token in ``fields``): NUL and bad UTF-8 in each
    field and an oversize body are 4xx; 2**70 as text is never a 500."""
    cases: list[tuple[str, bytes, bool]] = []
    for name in fields:
        cases.append(
            (f"nul in {name}", str(httpx.QueryParams({**fields, name: "a\x00b"})).encode(), True)
        )
        cases.append((f"bad utf-8 in {name}", f"{name}=%ff%fe".encode(), True))
        big = str(httpx.QueryParams({**fields, name: str(2**70)})).encode()
        cases.append((f"2**70 in {name}", big, False))
    cases.append(("huge body", b"x=" + b"x" * (2 << 20), True))
    for name in fields:  # the same form as multipart, which the kernel's guard does not parse
        parts = {k: (None, v) for k, v in fields.items()}
        answer = await http.post(path, files={**parts, name: (None, "a\x00b")})
        assert 400 <= answer.status_code < 500, ("multipart nul", name, path, answer.status_code)
        upload = await http.post(path, files={**parts, name: ("x.txt", b"x", "text/plain")})
        assert 400 <= upload.status_code < 500, ("upload", name, path, upload.status_code)
    for label, body, must_refuse in cases:
        answer = await http.post(
            path, content=body, headers={"content-type": "application/x-www-form-urlencoded"}
        )
        assert answer.status_code < 500, (label, path, answer.status_code)
        if must_refuse:
            assert 400 <= answer.status_code < 500, (label, path, answer.status_code)
