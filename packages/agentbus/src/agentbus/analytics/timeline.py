"""A conversation's events grouped into hops: pure, property-tested.

A hop is one message: who sent it to whom, its events in order, and its stage timings (ms):
``accept`` (creation to acceptance), ``publish``, ``deliver`` (from acceptance), ``read`` (from
delivery), ``total`` (acceptance to the hop's last event). ``gap_ms`` is the time from the
previous hop's acceptance to this one's: how long the conversation waited for the next turn.
"""

from __future__ import annotations

import json
from typing import Any

Row = dict[str, Any]

_STAGE_OF = {
    "message.accepted": "accept",
    "message.published": "publish",
    "message.delivered": "deliver",
    "message.read": "read",
}


def hops(rows: list[Row]) -> dict[str, Any]:
    """``rows`` ordered by time (each with message_id, event, at, at_ms, latency_ms ...)."""
    by_message: dict[str, Row] = {}
    for row in rows:
        hop = by_message.get(row["message_id"])
        if hop is None:
            hop = by_message[row["message_id"]] = {
                "message_id": row["message_id"], "from_agent_id": row["from_agent_id"],
                "to_agent_id": row["to_agent_id"], "type": row["type"], "task_id": None,
                "trace_id": row["trace_id"], "first_ms": row["at_ms"], "last_ms": row["at_ms"],
                "accepted_ms": None, "timings": {}, "events": [],
            }  # fmt: skip
        if row.get("task_id") and row["task_id"] != "\\N":
            hop["task_id"] = row["task_id"]
        hop["first_ms"] = min(hop["first_ms"], row["at_ms"])
        hop["last_ms"] = max(hop["last_ms"], row["at_ms"])
        stage = _STAGE_OF.get(row["event"])
        if stage is not None and stage not in hop["timings"]:
            hop["timings"][stage] = row["latency_ms"]
        if row["event"] == "message.accepted":
            hop["accepted_ms"] = row["at_ms"]
        details = row.get("details") or "{}"
        hop["events"].append({
            "event": row["event"], "at": row["at"], "attempt": row["attempt"],
            "actor": row["actor"], "latency_ms": row["latency_ms"],
            "error_code": row["error_code"],
            "details": json.loads(details) if isinstance(details, str) else details,
        })  # fmt: skip
    ordered = sorted(by_message.values(), key=lambda h: h["accepted_ms"] or h["first_ms"])
    previous: int | None = None
    out: list[Row] = []
    for hop in ordered:
        start = hop.pop("accepted_ms") or hop["first_ms"]
        hop["timings"]["total"] = hop["last_ms"] - start
        hop["gap_ms"] = None if previous is None else start - previous
        previous = start
        out.append(hop)
    first = min(h["first_ms"] for h in out)
    last = max(h["last_ms"] for h in out)
    for hop in out:
        del hop["first_ms"], hop["last_ms"]
    return {"hops": out, "messages": len(out), "events": len(rows), "duration_ms": last - first}
