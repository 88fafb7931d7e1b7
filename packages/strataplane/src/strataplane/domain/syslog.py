"""RFC 5424 syslog messages for audit events, and RFC 6587 octet-counted framing for TCP.

One message per event: facility 13 (log audit), severity 6 (informational), APP-NAME
``strataplane``, MSGID the action, structured data ``[audit@32473 tenant= seq=]`` and the event
as JSON (UTF-8, after a BOM) as MSG. Header fields are printable US-ASCII as the RFC requires.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

__all__ = ["PRI", "frame_tcp", "message"]

PRI = 13 * 8 + 6
_SD_ID = "audit@32473"  # 32473: the enterprise number RFC 5612 reserves for documentation
_UNPRINTABLE = re.compile(r"[^\x21-\x7e]")


def _field(value: str, limit: int) -> str:
    cleaned = _UNPRINTABLE.sub("_", value)[:limit]
    return cleaned or "-"


def _param(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("]", "\\]")


def message(event: Mapping[str, Any], hostname: str) -> bytes:
    """The RFC 5424 message of one audit event (as ``store.audit.event_of`` gives it)."""
    sd = f'[{_SD_ID} tenant="{_param(str(event["tenant_id"]))}" seq="{int(event["seq"])}"]'
    header = " ".join(
        (
            f"<{PRI}>1",
            str(event["ts"]),
            _field(hostname, 255),
            "strataplane",
            "-",
            _field(str(event["action"]), 32),
            sd,
        )
    )
    body = json.dumps(event, separators=(",", ":"), sort_keys=True, ensure_ascii=False)
    return header.encode("ascii") + b" \xef\xbb\xbf" + body.encode()


def frame_tcp(msg: bytes) -> bytes:
    """RFC 6587 octet counting: ``MSG-LEN SP SYSLOG-MSG``."""
    return str(len(msg)).encode("ascii") + b" " + msg
