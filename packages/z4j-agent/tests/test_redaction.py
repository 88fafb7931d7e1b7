"""Redaction: keys, value patterns, structure bounds and linear-time matching."""

from __future__ import annotations

import json
import time
from collections import OrderedDict

import pytest
from z4j_agent.redaction import (
    REDACTED,
    RedactionLimits,
    find_secrets,
    is_sensitive_key,
    redact,
    redact_text,
)

JWT = "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.SflKxwRJSMeKKF2QT4fwpM"


@pytest.mark.parametrize(
    "key",
    [
        "password",
        "PASSWORD",
        "db_password",
        "passwd",
        "userPassword",
        "new-password",
        "secret",
        "client_secret",
        "clientSecret",
        "token",
        "access_token",
        "refreshToken",
        "X-Auth-Token",
        "authorization",
        "Proxy-Authorization",
        "api_key",
        "apikey",
        "apiKey",
        "X-Api-Key",
        "access_key",
        "AWS_SECRET_ACCESS_KEY",
        "private_key",
        "privateKey",
        "cookie",
        "Set-Cookie",
        "session",
        "sessionid",
        "SESSION_KEY",
        "credentials",
        "credential",
        "passphrase",
        "basic_auth",
        "pwd",
        "jwt",
    ],
)
def test_sensitive_keys(key: str) -> None:
    assert is_sensitive_key(key)


@pytest.mark.parametrize(
    "key",
    [
        "max_tokens",
        "token_type",
        "routing_key",
        "primary_key",
        "name",
        "keys",
        "author",
        "sessions_count",
        "queue",
        "",
    ],
)
def test_harmless_keys(key: str) -> None:
    assert not is_sensitive_key(key)


def test_extra_keys_match_normalised_suffixes() -> None:
    assert is_sensitive_key("user_ssn", ["SSN"])
    assert is_sensitive_key("cardNumber", ["card-number"])
    assert not is_sensitive_key("user_ssn")
    assert redact({"ssn": "123", "n": 1}, ["ssn"]) == {"ssn": REDACTED, "n": 1}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("connect(password='hunter2', user='bob')", "connect(password='[redacted]', user='bob')"),
        ("postgres://bob:s3cr3t@db:5432/app", "postgres://bob:[redacted]@db:5432/app"),
        ("redis://:pw@cache:6379/0", "redis://:[redacted]@cache:6379/0"),
        ("Authorization: Bearer abcdefghijklmnop", "Authorization: Bearer [redacted]"),
        ('-H "Authorization: Basic dXNlcjpwYXNz" x', '-H "Authorization: Basic [redacted]" x'),
        (f"jwt {JWT} end", "jwt [redacted] end"),
        ("id AKIAIOSFODNN7EXAMPLE ok", "id [redacted] ok"),
        ("AKIAIOSFODNN7EXAMPLE:wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "[redacted]:[redacted]"),
        (
            "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
            "aws_secret_access_key = [redacted]",
        ),
        ("t ghp_" + "a1" * 18 + " x", "t [redacted] x"),
        ("github_pat_" + "A" * 30 + " x", "[redacted] x"),
        ("slack xoxb-123456789012-abcdefghij", "slack [redacted]"),
        ("stripe sk_live_4eC39HqLyjWDarjtT1zdp7dc", "stripe [redacted]"),
        ("rk_live_abcdefghijklmnop.", "[redacted]."),
        ("k AIza" + "B" * 35 + " x", "k [redacted] x"),
        ("https://x/cb?token=abc&next=1", "https://x/cb?token=[redacted]&next=1"),
        (
            "next=https://x/?token=abc&password=def",
            "next=https://x/?token=[redacted]&password=[redacted]",
        ),
        (
            '{"password": "hun\\"ter", "max_tokens": 5}',
            '{"password": "[redacted]", "max_tokens": 5}',
        ),
        ("Cookie: a=b; sessionid=xyz\nnext", "Cookie: [redacted]\nnext"),
        ("--password=abc --user=bob", "--password=[redacted] --user=bob"),
        ("if password == expected:", "if password == expected:"),
    ],
)
def test_value_patterns_mask_only_the_secret(text: str, expected: str) -> None:
    assert redact_text(text) == expected


def test_pem_private_key_blocks() -> None:
    block = "-----BEGIN RSA PRIVATE KEY-----\nMIIEow\nIBAAK\n-----END RSA PRIVATE KEY-----"
    assert redact_text(f"a\n{block}\nb") == (
        "a\n-----BEGIN RSA PRIVATE KEY-----[redacted]-----END RSA PRIVATE KEY-----\nb"
    )
    # A block cut short (a truncated log) is masked to the end; certificates are public.
    assert redact_text("x -----BEGIN PRIVATE KEY-----\nMIIE") == (
        "x -----BEGIN PRIVATE KEY-----[redacted]"
    )
    cert = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----"
    assert redact_text(cert) == cert


def test_traceback_stays_readable() -> None:
    tb = (
        'Traceback (most recent call last):\n  File "app.py", line 3, in run\n'
        "    db.connect(dsn)\nOperationalError: connection to postgresql://app:pa55@db/x failed\n"
    )
    out = redact_text(tb)
    assert "pa55" not in out
    assert out == tb.replace("pa55", REDACTED)


def test_structures_are_copied_and_json_safe() -> None:
    original = {
        "password": {"nested": "x"},
        "items": ("a", b"bytes", {1, 2}),
        3: float("inf"),
        "obj": object(),
        "od": OrderedDict(token="t"),
    }
    out = redact(original)
    json.dumps(out, allow_nan=False)
    assert out["password"] == REDACTED
    assert out["items"][1] == "b'bytes'"
    assert out["3"] == "inf"
    assert out["od"] == {"token": REDACTED}
    assert original["password"] == {"nested": "x"}


def test_bounds_depth_items_and_length() -> None:
    limits = RedactionLimits(max_depth=3, max_items=5, max_string=100, max_repr=20)
    deep: list[object] = []
    cursor = deep
    for _ in range(10):
        cursor.append([])
        cursor = cursor[0]  # type: ignore[assignment]
    out = redact({"deep": deep, "many": list(range(50)), "s": "x" * 1000}, limits=limits)
    assert json.dumps(out).count("[truncated: nested too deeply]") == 1
    assert len(out["many"]) == 5
    assert out["many"][-1] == "[truncated: 46 more items]"
    assert len(out["s"]) <= 100
    assert out["s"].endswith("[truncated]")
    assert len(redact({str(i): i for i in range(50)}, limits=limits)) == 5
    assert redact(redact(out, limits=limits), limits=limits) == out


def test_cycles_are_bounded() -> None:
    cyclic: list[object] = []
    cyclic.append(cyclic)
    assert "nested too deeply" in json.dumps(redact(cyclic))


def test_broken_repr_does_not_raise() -> None:
    class Broken:
        def __repr__(self) -> str:
            raise RuntimeError("no")

    assert redact(Broken()) == "<unrepresentable Broken>"


def test_find_secrets_counts_what_redact_removes() -> None:
    value = {"password": "x", "msg": f"Bearer abcdefghijk and {JWT}"}
    assert len(find_secrets(value)) == 3
    assert find_secrets(redact(value)) == []


ADVERSARIAL = {
    "word run": "a" * 200_000,
    "jwt prefixes": "eyJ" * 66_000,
    "jwt segments": "eyJabcdefgh." * 16_000,
    "schemes": "a://" * 50_000,
    "long userinfo": "x://" + "a" * 100_000 + ":" + "b" * 100_000,
    "userinfo runs": "ab://u:" * 28_000,
    "colons": "a:" * 100_000,
    "assignments": "a=" * 100_000,
    "sensitive keys": "key=" * 50_000,
    "sensitive pairs": "token=x " * 25_000,
    "unterminated quotes": 'pwd="' * 40_000,
    "escapes": 'password="' + "\\" * 200_000,
    "bearers": "bearer " * 28_000,
    "bearer spaces": "Bearer" + " " * 200_000,
    "pem headers": "-----BEGIN " * 18_000,
    "pem keys": "-----BEGIN PRIVATE KEY-----" * 7_000,
    "dashes": "-" * 200_000,
    "aws ids": "AKIAABCDEFGHIJKLMNOP:" * 9_000,
    "token prefixes": "ghp_xoxb-sk_live_AIza" * 9_000,
    "base64": "A/+=" * 50_000,
    "whitespace": " \t\n" * 66_000,
}


@pytest.mark.parametrize("name", sorted(ADVERSARIAL))
def test_matching_is_linear_on_adversarial_input(name: str) -> None:
    # A backtracking blow-up on 200 kB takes minutes of CPU; linear matching takes
    # milliseconds. CPU time, not wall time, so a busy machine does not fail it.
    text = ADVERSARIAL[name]
    started = time.process_time()
    redact_text(text)
    redact_text(text, ["custom"])
    assert time.process_time() - started < 10.0, name
