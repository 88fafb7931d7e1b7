"""What an agent's reports mean (schema: agent_health, agent_instance): versions from
User-Agent and heartbeats, health from a Telegraf heartbeat, and HTTP dates. Pure functions.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from email.utils import format_datetime

__all__ = [
    "Report",
    "health_of",
    "http_date",
    "telegraf_version",
]

_UA = re.compile(r"Telegraf/v?(\S+)")
_HEARTBEAT_VERSION = re.compile(r"Telegraf\s+v?(\S+)")
_SEMVER = re.compile(r"(\d+)\.(\d+)\.(\d+)(?:-([0-9A-Za-z.-]+))?(?:\+[0-9A-Za-z.-]+)?")


def _normalize(raw: str) -> str | None:
    m = _SEMVER.match(raw)
    if m is None:
        return None
    major, minor, patch, pre = m.groups()
    version = f"{int(major)}.{int(minor)}.{int(patch)}"
    return f"{version}-{pre}" if pre else version


def telegraf_version(text: str | None) -> tuple[str | None, str | None]:
    """(normalized semver, raw) from ``Telegraf/1.37.0 Go/1.24`` or ``Telegraf 1.37.0``."""
    if not text:
        return None, None
    m = _UA.search(text) or _HEARTBEAT_VERSION.search(text)
    if m is None:
        return None, text[:200]
    return _normalize(m.group(1)), m.group(1)[:200]


def http_date(when: datetime) -> str:
    """An RFC 9110 HTTP date (GMT, whole seconds): the same instant gives the same string on
    every replica."""
    return format_datetime(when.replace(microsecond=0), usegmt=True)


@dataclass(frozen=True, slots=True)
class Report:
    """The health-relevant part of a heartbeat."""

    status: str | None  # OK, WARN, FAIL, UNDEFINED
    errors: int = 0
    warnings: int = 0


def health_of(report: Report) -> tuple[str, str | None]:
    """(health, message): the reported status wins; without one, errors mean degraded."""
    status = (report.status or "UNDEFINED").upper()
    counts = f"{report.errors} errors, {report.warnings} warnings since the last report"
    if status == "FAIL":
        return "failed", f"status FAIL; {counts}"
    if status == "WARN":
        return "degraded", f"status WARN; {counts}"
    if status == "OK":
        return "healthy", None
    if report.errors > 0:
        return "degraded", counts
    return "healthy", None
