"""Secrets inside text: sensitive key names and the secret-shaped substrings of a string.

Each rule yields the spans to mask, and only those spans are replaced, so a log line or a
traceback stays readable around them. The rules run in a fixed order over the text as masked so
far; a span that already reads ``[redacted]`` is never reported again, which makes masking
idempotent.

Matching is linear in the length of the text. Python's ``re`` backtracks, so every pattern
(a) starts right after a negative lookbehind that excludes the characters its first run consumes,
so only the first position of a run can start a long scan, and (b) uses possessive quantifiers,
so a failed attempt never re-scans what it consumed. PEM blocks are found with ``str.find``.
The adversarial timing tests hold this property.

Dependency-free: the brain imports it to redact again on receipt.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable, Iterator

REDACTED = "[redacted]"

# A normalised key (lowercase, letters and digits only) is sensitive if it contains one of
# these words, or ends with one of the suffixes: "max_tokens" or "routing_key" must stay.
SENSITIVE_WORDS = frozenset(
    {
        "password",
        "passwd",
        "passphrase",
        "secret",
        "apikey",
        "privatekey",
        "accesskey",
        "credential",
        "authorization",
        "cookie",
    }
)
SENSITIVE_SUFFIXES = frozenset(
    {
        "token",
        "auth",
        "session",
        "sessionid",
        "sessionkey",
        "pwd",
        "signingkey",
        "encryptionkey",
        "jwt",
    }
)

_NON_ALNUM = re.compile(r"[^a-z0-9]+")

Span = tuple[int, int]
Rule = Callable[[str, tuple[str, ...]], Iterator[Span]]


def normalize_key(key: str) -> str:
    """``X-Api-Key``, ``api_key`` and ``apiKey`` all become ``apikey``."""
    return _NON_ALNUM.sub("", key[:256].lower())


def normalize_keys(keys: Iterable[str]) -> tuple[str, ...]:
    if keys == ():
        return ()  # the common case, on every event: no operator keys
    return tuple(sorted({n for n in (normalize_key(k) for k in keys) if n}))


@functools.lru_cache(maxsize=4096)
def is_sensitive_key(key: str, extra: tuple[str, ...] = ()) -> bool:
    """Whether values under ``key`` are secret. ``extra`` holds normalised operator keys."""
    name = normalize_key(key)
    if not name:
        return False
    if any(word in name for word in SENSITIVE_WORDS):
        return True
    return any(name.endswith(suffix) for suffix in SENSITIVE_SUFFIXES) or any(
        name.endswith(suffix) for suffix in extra
    )


def _pem(text: str, _extra: tuple[str, ...]) -> Iterator[Span]:
    begin = "-----BEGIN "
    pos = 0
    while (start := text.find(begin, pos)) != -1:
        label_start = start + len(begin)
        label_end = text.find("-----", label_start)
        if label_end == -1:
            return
        label = text[label_start:label_end]
        pos = label_end
        if len(label) > 64 or "PRIVATE KEY" not in label:
            continue
        body = label_end + 5
        end = text.find(f"-----END {label}-----", body)
        # A block cut short (a truncated log line) is masked to the end of the text.
        yield (body, len(text) if end == -1 else end)
        if end == -1:
            return
        pos = end + len(label) + 14


_URL = re.compile(
    r"(?<![A-Za-z0-9+.\-])[A-Za-z][A-Za-z0-9+.\-]{0,30}+://[^\s:/?#@]*+:(?P<pw>[^\s/?#@]++)@"
)
_BEARER = re.compile(r"(?<![A-Za-z0-9_])(?i:bearer)[ \t]++(?P<tok>[A-Za-z0-9\-._~+/]{8,}+=*+)")
_KEY_BODY = r"[A-Za-z_\-][A-Za-z0-9_.\-]{0,99}+[\"']?+[ \t]{0,8}+[:=]"
# Only keys holding a stem of a sensitive word reach the Python check: "a=1" is no candidate.
# Operator keys can be anything, so with those every key is a candidate.
_KEY_HINTED = re.compile(
    r"(?<![A-Za-z0-9_.\-])(?=[A-Za-z0-9_.\-]{0,99}?(?i:pass|pwd|secret|token|auth|key|cookie"
    r"|session|cred|jwt))" + _KEY_BODY
)
_KEY_ANY = re.compile(r"(?<![A-Za-z0-9_.\-])" + _KEY_BODY)
_VALUE = re.compile(
    r"[ \t]{0,8}+(?:(?i:bearer|basic|token|digest|negotiate)[ \t]++)?+"
    r"(?:\"(?P<dq>(?:[^\"\\\n]|\\.)*+)|'(?P<sq>(?:[^'\\\n]|\\.)*+)"
    r"|(?P<bare>[^\s\"'&;,)}>=<][^\s\"'&;,)}><]*+))"
)
_LINE = re.compile(r"[ \t]{0,8}+(?P<line>[^\r\n]++)")
_AWS_PAIR = re.compile(
    r"(?<![A-Za-z0-9])A[KS]IA[A-Z0-9]{16}[\s:=,;|\"']{1,8}+(?P<secret>[A-Za-z0-9/+=]{40})"
    r"(?![A-Za-z0-9/+=])"
)
_TOKENS = re.compile(
    r"(?<![A-Za-z0-9_\-])(?:"
    r"eyJ[A-Za-z0-9_\-]{8,}+(?:\.[A-Za-z0-9_\-=]*+){2,4}+"
    r"|(?:AKIA|ASIA|ABIA|ACCA|AGPA|AIDA|AIPA|ANPA|ANVA|APKA|AROA)[A-Z0-9]{16}(?![A-Za-z0-9])"
    r"|gh[pousr]_[A-Za-z0-9]{36,}+"
    r"|github_pat_[A-Za-z0-9_]{22,}+"
    r"|xox[abposr]-[A-Za-z0-9\-]{10,}+"
    r"|(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{10,}+"
    r"|AIza[A-Za-z0-9_\-]{35}(?![A-Za-z0-9_\-])"
    r")"
)


def _url(text: str, _extra: tuple[str, ...]) -> Iterator[Span]:
    for match in _URL.finditer(text):
        yield match.span("pw")


def _bearer(text: str, _extra: tuple[str, ...]) -> Iterator[Span]:
    for match in _BEARER.finditer(text):
        yield match.span("tok")


def _key_values(text: str, extra: tuple[str, ...]) -> Iterator[Span]:
    # The key regex stops at the operator so that a harmless key never swallows a value that
    # holds a sensitive pair of its own (``next=https://x/?token=...``).
    masked_until = 0
    for match in (_KEY_ANY if extra else _KEY_HINTED).finditer(text):
        key = match.group().rstrip(":= \t\"'")
        if match.start() < masked_until or not is_sensitive_key(key, extra):
            continue
        if "cookie" in normalize_key(key):
            value = _LINE.match(text, match.end())
            group = "line"
        else:
            value = _VALUE.match(text, match.end())
            group = next((g for g in ("dq", "sq", "bare") if value and value.group(g)), "bare")
        if value is not None and value.group(group):
            masked_until = value.end()
            yield value.span(group)


def _aws_pair(text: str, _extra: tuple[str, ...]) -> Iterator[Span]:
    for match in _AWS_PAIR.finditer(text):
        yield match.span("secret")


def _tokens(text: str, _extra: tuple[str, ...]) -> Iterator[Span]:
    for match in _TOKENS.finditer(text):
        yield match.span()


RULES: tuple[Rule, ...] = (_pem, _url, _bearer, _key_values, _aws_pair, _tokens)

# Something every rule needs before it can match: a key/value or URL separator, a PEM header,
# "bearer", or the start of a known token shape. Most strings in task events (names, queues,
# hosts, plain arguments) contain none; substring tests in C let them skip the rules entirely.
_CANDIDATE_LITERALS = (
    ":",
    "=",
    "-----BEGIN ",
    "eyJ",
    "ghp_",
    "gho_",
    "ghu_",
    "ghs_",
    "ghr_",
    "github_pat_",
    "xox",
    "k_live_",  # sk_live_, rk_live_
    "k_test_",
    "AIza",
)
_CANDIDATE_SHAPE = re.compile(r"A[A-Z0-9]{19}")


def may_hold_secret(text: str) -> bool:
    """False when no rule can match anywhere in ``text``, so masking would return it as it is.

    What it looks for is always a run of printable ASCII other than ``"`` and ``\\``, which a
    JSON encoding copies unchanged, so asking about the encoding of a value (keys, strings and
    all) answers for every string inside it.
    """
    for literal in _CANDIDATE_LITERALS:
        if literal in text:
            return True
    return "bearer" in text.lower() or _CANDIDATE_SHAPE.search(text) is not None


def _live_spans(rule: Rule, text: str, extra: tuple[str, ...]) -> list[Span]:
    return [(a, b) for a, b in rule(text, extra) if b > a and text[a:b] != REDACTED]


def mask_text(text: str, extra: tuple[str, ...] = ()) -> str:
    """Replace every secret span of ``text`` with ``[redacted]``; the rest is unchanged."""
    if not may_hold_secret(text):
        return text
    return mask_all_rules(text, extra)


def mask_all_rules(text: str, extra: tuple[str, ...] = ()) -> str:
    """``mask_text`` without the shortcut; every rule runs (tests compare the two)."""
    for rule in RULES:
        spans = _live_spans(rule, text, extra)
        if not spans:
            continue
        pieces: list[str] = []
        cursor = 0
        for start, end in spans:
            pieces.append(text[cursor:start])
            pieces.append(REDACTED)
            cursor = end
        pieces.append(text[cursor:])
        text = "".join(pieces)
    return text


def secret_spans(text: str, extra: tuple[str, ...] = ()) -> list[str]:
    """The secret substrings each rule finds in ``text`` as it stands (nothing once masked)."""
    if not may_hold_secret(text):
        return []
    return [text[a:b] for rule in RULES for a, b in _live_spans(rule, text, extra)]
