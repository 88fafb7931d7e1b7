"""Request ids: accept a sane incoming ``X-Request-ID`` or make one, and keep it in a contextvar.

The id travels in the response header of the same name, in every problem body and in every log
line written while the request runs, so one id joins a client's report to the server's logs.
An incoming id is kept only when it is short and made of URL-safe characters; anything else
(too long, spaces, control characters, quotes) could forge or break log lines and is replaced.
"""

from __future__ import annotations

import re
from contextvars import ContextVar, Token

from platformkit.ids import uuid7

__all__ = ["HEADER", "accept_request_id", "current_request_id", "new_request_id"]

HEADER = "X-Request-ID"
MAX_LENGTH = 128
_SANE = re.compile(rf"[A-Za-z0-9][A-Za-z0-9._:+=/-]{{0,{MAX_LENGTH - 1}}}")

_request_id: ContextVar[str | None] = ContextVar("platformkit_request_id", default=None)


def new_request_id() -> str:
    """A fresh id: a UUIDv7, so ids sort by arrival time in logs."""
    return str(uuid7())


def accept_request_id(incoming: str | None) -> str:
    """Return ``incoming`` when it is sane, else a fresh id."""
    if incoming is not None and _SANE.fullmatch(incoming):
        return incoming
    return new_request_id()


def current_request_id() -> str | None:
    """The id of the request being handled in this context, or None outside a request."""
    return _request_id.get()


def bind_request_id(value: str | None) -> Token[str | None]:
    return _request_id.set(value)


def unbind_request_id(token: Token[str | None]) -> None:
    _request_id.reset(token)
