"""wirekit.terminal.printable: nothing a terminal obeys survives, everything else is kept."""

from __future__ import annotations

import unicodedata

from hypothesis import given
from hypothesis import strategies as st
from wirekit.terminal import printable

BIDI = {"\u061c", "\u200e", "\u200f", *map(chr, range(0x202A, 0x202F))}
BIDI |= set(map(chr, range(0x2066, 0x206A)))


def obeyed(ch: str) -> bool:
    """What a terminal acts on rather than shows (or shows other than it is)."""
    return (unicodedata.category(ch) in ("Cc", "Cs") and ch not in "\n\t") or ch in BIDI


@given(st.text())
def test_no_control_character_survives(text: str) -> None:
    shown = printable(text)
    assert not any(obeyed(ch) for ch in shown)
    shown.encode("utf-8")  # lone surrogates are gone too


@given(st.text())
def test_it_is_idempotent_and_keeps_ordinary_text(text: str) -> None:
    shown = printable(text)
    assert printable(shown) == shown
    if not any(obeyed(ch) for ch in text):
        assert shown == text


@given(st.lists(st.text().filter(lambda t: not any(obeyed(c) for c in t)) | st.sampled_from(
    ["\x1b", "\x07", "\r", "\x9b", "\u202e", "\x00", "\x7f"])))  # fmt: skip
def test_every_control_character_becomes_one_visible_escape(parts: list[str]) -> None:
    expected = "".join(
        (f"\\x{ord(p):02x}" if ord(p) < 0x100 else f"\\u{ord(p):04x}")
        if len(p) == 1 and obeyed(p)
        else p
        for p in parts
    )
    assert printable("".join(parts)) == expected


def test_the_known_attacks() -> None:
    assert printable("\x1b[2J\x1b]0;pwned\x07hi") == "\\x1b[2J\\x1b]0;pwned\\x07hi"
    assert printable("ok\rFAKE\n\tnext") == "ok\\x0dFAKE\n\tnext"
    assert printable("\x9b31m") == "\\x9b31m"
    assert printable("abc\u202edcba") == "abc\\u202edcba"
    assert printable("caf\u00e9 \u2713 \\n") == "caf\u00e9 \u2713 \\n"
