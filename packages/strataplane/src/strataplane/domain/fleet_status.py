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
    "elastic_version",
    "health_of",
    "http_date",
    "telegraf_version",
    "vector_version",
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


_VECTOR_UA = re.compile(r"Vector/v?(\S+)")


def vector_version(text: str | None) -> tuple[str | None, str | None]:
    """(normalized semver, raw) from Vector's ``User-Agent: Vector/0.57.0 ...`` or a bare
    version (``build_info``'s ``version`` tag)."""
    if not text:
        return None, None
    m = _VECTOR_UA.search(text)
    raw = m.group(1) if m is not None else text.strip()
    return _normalize(raw), raw[:200]


_ELASTIC_UA = re.compile(r"elastic agent v?(\S+)", re.IGNORECASE)


def elastic_version(user_agent: str | None) -> tuple[str | None, str | None]:
    """(normalized semver, raw) from Elastic Agent's ``User-Agent: elastic agent 8.15.0``."""
    m = _ELASTIC_UA.search(user_agent or "")
    return (_normalize(m.group(1)), m.group(1)[:200]) if m else (None, None)


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
    """(health, message): FAIL is failed, WARN degraded; otherwise errors logged since the last
    report mean degraded. ``OK`` does not outweigh errors: it is the heartbeat's default status
    when none of its status conditions matches, and the rendered heartbeat sets none."""
    status = (report.status or "UNDEFINED").upper()
    counts = f"{report.errors} errors, {report.warnings} warnings since the last report"
    if status == "FAIL":
        return "failed", f"status FAIL; {counts}"
    if status == "WARN":
        return "degraded", f"status WARN; {counts}"
    if report.errors > 0:
        return "degraded", counts
    return "healthy", None
    if report.errors > 0:
        return "degraded", counts
    return "healthy", None
