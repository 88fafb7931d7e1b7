"""Structured logs: one JSON object per line, carrying the request id, with secrets redacted.

Each line has ``ts`` (UTC, RFC 3339), ``level``, ``logger``, ``msg``, ``request_id`` when a
request is being handled, then any ``extra=`` fields and ``exc`` for a traceback. Fields whose
names suggest a secret (authorization, cookie, token, password, secret, api key, credential) are
replaced by ``"[redacted]"``, at any depth, and ``Bearer``/``Basic`` credentials are scrubbed
from messages, so a careless ``log.info("%s", headers)`` cannot leak one.
"""

from __future__ import annotations

import json
import logging
import re
import sys
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, TextIO

from platformkit.http.requestid import current_request_id

__all__ = ["JsonFormatter", "RequestIdFilter", "configure_logging", "logging_config", "redact"]

REDACTED = "[redacted]"
_SENSITIVE_KEY = re.compile(
    r"authorization|cookie|token|secret|passw|api[-_]?key|credential|session", re.IGNORECASE
)
_SCHEMES = r"Bearer|Basic|Token|Digest"
_SCHEME_VALUE = re.compile(rf"\b({_SCHEMES})\s+(?!(?:{_SCHEMES})\b)[^\s,;\"']+", re.IGNORECASE)
_RECORD_FIELDS = frozenset(logging.LogRecord("", 0, "", 0, "", (), None).__dict__) | {
    "message",
    "asctime",
    "request_id",
}


def _scrub(text: str) -> str:
    return _SCHEME_VALUE.sub(lambda m: f"{m.group(1)} {REDACTED}", text)


def redact(key: str, value: Any) -> Any:
    """``value`` with secrets replaced; ``key`` is the name it is logged under."""
    if _SENSITIVE_KEY.search(key):
        return REDACTED
    if isinstance(value, str):
        return _scrub(value)
    if isinstance(value, Mapping):
        return {str(k): redact(str(k), v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        # A list of (name, value) pairs, such as ASGI headers, is judged by each name.
        if value and all(isinstance(i, tuple) and len(i) == 2 for i in value):
            return [[_text(n), redact(_text(n), v)] for n, v in value]
        return [redact(key, item) for item in value]
    if isinstance(value, bytes):
        return _scrub(value.decode("utf-8", "replace"))
    return value


def _text(value: Any) -> str:
    return value.decode("latin-1") if isinstance(value, bytes) else str(value)


class RequestIdFilter(logging.Filter):
    """Stamps each record with the current request id (for text formats and other handlers)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if getattr(record, "request_id", None) is None:
            record.request_id = current_request_id()
        return True


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        ts = datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds")
        out: dict[str, Any] = {
            "ts": ts.replace("+00:00", "Z"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": _scrub(record.getMessage()),
        }
        request_id = getattr(record, "request_id", None) or current_request_id()
        if request_id is not None:
            out["request_id"] = request_id
        for key, value in record.__dict__.items():
            if key not in _RECORD_FIELDS and not key.startswith("_") and key not in out:
                out[key] = redact(key, value)
        if record.exc_info:
            out["exc"] = self.formatException(record.exc_info)
        if record.stack_info:
            out["stack"] = self.formatStack(record.stack_info)
        return json.dumps(out, ensure_ascii=False, default=str)


_TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s [%(request_id)s] %(message)s"
_installed: list[logging.Handler] = []


def configure_logging(
    level: str | int = "INFO", *, json: bool = True, stream: TextIO | None = None
) -> logging.Handler:
    """Send the root logger's output to ``stream`` (stdout by default), as JSON or as text.

    Calling it again replaces the handler it installed before and leaves other handlers alone.
    Returns the handler, so a caller can remove it.
    """
    root = logging.getLogger()
    for old in _installed:
        root.removeHandler(old)
    _installed.clear()
    handler = logging.StreamHandler(stream or sys.stdout)
    handler.setFormatter(JsonFormatter() if json else logging.Formatter(_TEXT_FORMAT))
    handler.addFilter(RequestIdFilter())
    root.addHandler(handler)
    root.setLevel(level.upper() if isinstance(level, str) else level)
    _installed.append(handler)
    return handler


def logging_config(level: str = "info", *, json: bool = True) -> dict[str, Any]:
    """The same setup as a ``logging.config.dictConfig`` dict (granian's ``--log-config``)."""
    formatter = {"()": "platformkit.http.logs.JsonFormatter"} if json else {"format": _TEXT_FORMAT}
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "filters": {"request_id": {"()": "platformkit.http.logs.RequestIdFilter"}},
        "formatters": {"default": formatter},
        "handlers": {
            "default": {
                "class": "logging.StreamHandler",
                "formatter": "default",
                "filters": ["request_id"],
                "stream": "ext://sys.stdout",
            }
        },
        "loggers": {
            "_granian": {"handlers": [], "propagate": True},
            "granian.access": {"handlers": [], "propagate": True},
        },
        "root": {"handlers": ["default"], "level": level.upper()},
    }
