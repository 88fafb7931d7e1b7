"""Text from other people shown on a terminal: control characters made visible.

A message body, an agent's name or a server's error detail may carry terminal escape sequences
(clear the screen, set the window title, rewrite the line with a carriage return, hide text) or
bidirectional overrides that make the text read differently from what it is. :func:`printable`
replaces each such character with a visible escape, so what the terminal shows is what was
sent: C0 controls (ESC and CR included; newline and tab are kept), DEL and C1 controls become
``\\xNN``; bidirectional controls and lone surrogates become ``\\uNNNN``. Everything else,
backslashes included, is left as it is.

:class:`PrintableText` does it for every string a Rich console renders (``print`` arguments,
table cells, status lines), so a command cannot forget it: mix it in before Rich's ``Console``
(``class Console(PrintableText, rich.console.Console)``); this module itself imports nothing.
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["PrintableText", "printable"]

_UNSAFE = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\ud800-\udfff]"
)


def _visible(match: re.Match[str]) -> str:
    point = ord(match.group())
    return f"\\x{point:02x}" if point < 0x100 else f"\\u{point:04x}"


def printable(text: str) -> str:
    """``text`` with every control character (but newline and tab) replaced by its escape."""
    return _UNSAFE.sub(_visible, text)


class PrintableText:
    """A mixin for ``rich.console.Console``: each string is made :func:`printable` before Rich
    parses its markup and renders it."""

    def render_str(self, text: str, **options: Any) -> Any:
        return super().render_str(printable(text), **options)  # type: ignore[misc]  # Console's, by the documented mixin order
