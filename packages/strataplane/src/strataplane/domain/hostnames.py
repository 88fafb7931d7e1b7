"""Host names as RFC 1123 (§2.1) defines them, the rule enrollment and heartbeats check.

A name is dot-separated labels of 1 to 63 letters, digits and hyphens, none starting or
ending with a hyphen (a leading digit is allowed, as RFC 1123 relaxed RFC 952), at most 253
characters in all; one trailing dot (the root) is accepted. ASCII only: internationalized
names travel in their ``xn--`` form.
"""

from __future__ import annotations

import re

__all__ = ["MAX_HOST_NAME", "is_host_name"]

MAX_HOST_NAME = 253
_LABEL = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?")


def is_host_name(text: str) -> bool:
    name = text[:-1] if text.endswith(".") else text
    if not name or len(name) > MAX_HOST_NAME:
        return False
    return all(_LABEL.fullmatch(label) for label in name.split("."))
