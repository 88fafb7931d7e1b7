"""Tokens: layout and entropy per format, uniqueness, hashing, constant-time verify, parsing."""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import string

import pytest
from hypothesis import given
from hypothesis import strategies as st
from platformkit.tokens import (
    ALPHANUMERIC,
    HmacTokenHasher,
    InvalidTokenError,
    Sha256TokenHasher,
    TokenFormat,
    hmac_sha256_hex,
    mint_token,
    parse_token,
    sha256_hex,
    verify_token,
)

KEY = b"k" * 32
OTHER_KEY = b"o" * 32

FORMATS = {
    "base32": TokenFormat.encoded("sp_", nbytes=32, encoding="base32"),
    "urlsafe": TokenFormat.encoded("z4j_", nbytes=32, encoding="urlsafe"),
    "hex": TokenFormat.encoded("", nbytes=32, encoding="hex"),
    "alphabet": TokenFormat.from_alphabet("ab_live_", length=40),
}
PATTERNS = {
    "base32": r"sp_[a-z2-7]{52}",
    "urlsafe": r"z4j_[A-Za-z0-9_-]{43}",
    "hex": r"[0-9a-f]{64}",
    "alphabet": r"ab_live_[A-Za-z0-9]{40}",
}


@pytest.mark.parametrize("name", FORMATS)
def test_layout_prefix_and_length(name: str) -> None:
    fmt = FORMATS[name]
    for _ in range(200):
        token = mint_token(fmt).plaintext
        assert re.fullmatch(PATTERNS[name], token), token
        assert token.startswith(fmt.prefix)
        assert len(token) == len(fmt.prefix) + fmt.body_length


@pytest.mark.parametrize(
    ("encoding", "decode"),
    [
        ("base32", lambda s: base64.b32decode(s.upper() + "=" * (-len(s) % 8))),
        ("urlsafe", lambda s: base64.urlsafe_b64decode(s + "=" * (-len(s) % 4))),
        ("hex", bytes.fromhex),
    ],
)
@pytest.mark.parametrize("nbytes", [25, 32, 33, 48])
def test_body_decodes_to_nbytes(encoding: str, decode: object, nbytes: int) -> None:
    fmt = TokenFormat.encoded("p_", nbytes=nbytes, encoding=encoding)  # type: ignore[arg-type]
    body = mint_token(fmt).plaintext[2:]
    assert len(decode(body)) == nbytes  # type: ignore[operator]
    assert "=" not in body


@pytest.mark.parametrize("name", FORMATS)
def test_uniqueness_and_character_spread(name: str) -> None:
    fmt = FORMATS[name]
    tokens = [mint_token(fmt).plaintext for _ in range(2000)]
    assert len(set(tokens)) == len(tokens)
    # Every character of the alphabet shows up: catches a body drawn from a narrowed range.
    seen = set("".join(t[len(fmt.prefix) :] for t in tokens))
    assert seen == set(fmt.alphabet)


def test_alphabet_characters_are_roughly_uniform() -> None:
    fmt = TokenFormat.from_alphabet("", length=200, alphabet="ab", display_length=0)
    body = "".join(mint_token(fmt).plaintext for _ in range(100))
    share = body.count("a") / len(body)
    assert 0.47 < share < 0.53


def test_custom_alphabet_is_respected() -> None:
    fmt = TokenFormat.from_alphabet("x-", length=60, alphabet=string.digits)
    assert re.fullmatch(r"x-\d{60}", mint_token(fmt).plaintext)


@pytest.mark.parametrize(
    "make",
    [
        lambda: TokenFormat.encoded("p_", nbytes=16),  # 128 bits, but 12 characters are shown
        lambda: TokenFormat.encoded("p_", nbytes=8, display_length=0),
        lambda: TokenFormat.from_alphabet("p_", length=20),
        lambda: TokenFormat.from_alphabet("p_", length=200, alphabet="aa"),
        lambda: TokenFormat.from_alphabet("p_", length=200, alphabet="a"),
        lambda: TokenFormat.encoded("p_", display_length=-1),
        lambda: TokenFormat.encoded("p_", encoding="base58"),  # type: ignore[arg-type]
    ],
)
def test_weak_or_invalid_formats_refused(make: object) -> None:
    with pytest.raises(ValueError):  # noqa: PT011 - each case fails a different check
        make()  # type: ignore[operator]


def test_display_prefix_and_last4() -> None:
    fmt = TokenFormat.from_alphabet("ab_live_", length=40, display_length=6)
    minted = mint_token(fmt)
    assert minted.display_prefix == minted.plaintext[: len("ab_live_") + 6]
    assert minted.display_prefix.startswith("ab_live_")
    assert len(minted.display_prefix) == 14
    assert minted.last4 == minted.plaintext[-4:]


def test_default_display_length_is_eight_body_characters() -> None:
    minted = mint_token(FORMATS["alphabet"])
    assert len(minted.display_prefix) == len("ab_live_") + 8


def test_plaintext_not_in_repr() -> None:
    minted = mint_token(FORMATS["alphabet"])
    assert minted.plaintext not in repr(minted)
    assert minted.hash in repr(minted)


@pytest.mark.parametrize("name", FORMATS)
def test_hash_is_sha256_and_never_the_plaintext(name: str) -> None:
    minted = mint_token(FORMATS[name])
    assert minted.hash == hashlib.sha256(minted.plaintext.encode()).hexdigest()
    assert minted.hash != minted.plaintext
    assert minted.plaintext not in minted.hash


def test_hmac_hasher_matches_reference_and_hides_key() -> None:
    hasher = HmacTokenHasher(KEY)
    minted = mint_token(FORMATS["base32"], hasher)
    expected = hmac.new(KEY, minted.plaintext.encode(), hashlib.sha256).hexdigest()
    assert minted.hash == expected == hmac_sha256_hex(KEY, minted.plaintext)
    assert minted.hash != sha256_hex(minted.plaintext)
    assert KEY.decode() not in repr(hasher)


def test_hmac_key_too_short_refused() -> None:
    with pytest.raises(ValueError, match="32 bytes"):
        HmacTokenHasher(b"short")


@pytest.mark.parametrize("hasher", [Sha256TokenHasher(), HmacTokenHasher(KEY)])
@pytest.mark.parametrize("name", FORMATS)
def test_verify_true_and_false(hasher: Sha256TokenHasher, name: str) -> None:
    fmt = FORMATS[name]
    minted = mint_token(fmt, hasher)
    other = mint_token(fmt, hasher)
    assert verify_token(fmt, hasher, minted.plaintext, minted.hash)
    assert not verify_token(fmt, hasher, other.plaintext, minted.hash)
    assert not verify_token(fmt, hasher, minted.plaintext, other.hash)
    assert not verify_token(fmt, hasher, minted.plaintext, minted.hash.upper()[:-1] + "Z")
    assert not verify_token(fmt, hasher, minted.plaintext, "")
    assert not verify_token(fmt, hasher, minted.plaintext, "é" * 64)
    flipped = minted.plaintext[:-1] + ("a" if minted.plaintext[-1] != "a" else "b")
    assert not verify_token(fmt, hasher, flipped, minted.hash)


def test_hmac_wrong_key_fails() -> None:
    fmt = FORMATS["alphabet"]
    minted = mint_token(fmt, HmacTokenHasher(KEY))
    assert HmacTokenHasher(KEY).verify(minted.plaintext, minted.hash)
    assert not HmacTokenHasher(OTHER_KEY).verify(minted.plaintext, minted.hash)
    assert not Sha256TokenHasher().verify(minted.plaintext, minted.hash)


@pytest.mark.parametrize("name", FORMATS)
def test_parse_accepts_minted(name: str) -> None:
    token = mint_token(FORMATS[name]).plaintext
    assert parse_token(FORMATS[name], token) == token


def test_parse_rejects_garbage_cheaply() -> None:
    fmt = FORMATS["alphabet"]
    good = mint_token(fmt).plaintext
    bad = [
        "",
        "ab_live_",
        good[:-1],
        good + "a",
        "ab_test_" + good[8:],
        good[:10] + "-" + good[11:],
        good[:10] + "é" + good[11:],
        " " + good,
        good.replace("ab_live_", "AB_LIVE_"),
    ]
    for candidate in bad:
        with pytest.raises(InvalidTokenError):
            parse_token(fmt, candidate)
        assert not verify_token(fmt, Sha256TokenHasher(), candidate, sha256_hex(candidate))
    with pytest.raises(InvalidTokenError):
        parse_token(fmt, None)  # type: ignore[arg-type]


def test_parse_error_does_not_echo_the_candidate() -> None:
    with pytest.raises(InvalidTokenError) as info:
        parse_token(FORMATS["hex"], "secret-looking-value")
    assert "secret-looking-value" not in str(info.value)


def test_base32_body_is_lowercase_only() -> None:
    fmt = FORMATS["base32"]
    token = mint_token(fmt).plaintext
    upper = fmt.prefix + token[len(fmt.prefix) :].upper()
    assert upper != token
    assert not fmt.matches(upper)


@given(st.text(max_size=80))
def test_parse_never_accepts_off_charset_text(candidate: str) -> None:
    fmt = FORMATS["alphabet"]
    body = candidate[len(fmt.prefix) :]
    expected = (
        candidate.startswith(fmt.prefix)
        and len(body) == 40
        and all(c in ALPHANUMERIC for c in body)
    )
    assert fmt.matches(candidate) is expected
