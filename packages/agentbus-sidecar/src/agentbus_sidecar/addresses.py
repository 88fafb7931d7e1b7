"""Agent addresses: ``agent://<tenant>/<workspace>/<name>`` (conventions §2).

Addresses are signed inside envelopes, so they are validated byte for byte and never folded;
only human input is lowercased, and only before an envelope is built from it.
"""

from __future__ import annotations

import re
from typing import NamedTuple

__all__ = ["RESERVED_NAMES", "Address", "normalize_input", "parse_address"]

_SEGMENT = r"[a-z0-9-]{3,40}"
_ADDRESS = re.compile(rf"^agent://({_SEGMENT})/({_SEGMENT})/({_SEGMENT})$")
RESERVED_NAMES = frozenset({"system", "gateway", "agentbus"})


class Address(NamedTuple):
    tenant: str
    workspace: str
    name: str

    def __str__(self) -> str:
        return f"agent://{self.tenant}/{self.workspace}/{self.name}"


def parse_address(text: str) -> Address:
    """Parse a canonical address; anything else (case, ports, slashes, other schemes) fails."""
    match = _ADDRESS.match(text) if isinstance(text, str) else None
    if match is None:
        raise ValueError(f"{text!r} is not an agent://<tenant>/<workspace>/<name> address")
    return Address(*match.groups())


def normalize_input(text: str) -> str:
    """What a human typed, made canonical: trimmed and lowercased, then validated."""
    return str(parse_address(text.strip().lower()))
