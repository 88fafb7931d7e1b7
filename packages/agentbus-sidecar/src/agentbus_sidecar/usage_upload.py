"""Uploading ``usage_local`` (data model §7) with ``POST /v1/usage`` (04-API-SPEC §9), from the
sidecar loop and before a command reads the inbox.

Up to 100 records a request, oldest first. A record is marked uploaded once the gateway has it
(accepted, or a duplicate of one it has) or has refused it for good (a 4xx for that record: it
would be refused again), and stays pending while the gateway is away or answers 5xx.
"""

from __future__ import annotations

from typing import Any

from agentbus_sidecar.errors import GatewayError, GatewayUnreachable
from agentbus_sidecar.runtime import Runtime
from agentbus_sidecar.store.usage import mark_uploaded, pending_usage

__all__ = ["BATCH", "upload_usage"]

BATCH = 100  # records of at most ~5 KB: well inside the 1 MiB body limit


async def upload_usage(rt: Runtime) -> tuple[int, list[str]]:
    """One pass: (records the gateway took, problems of the records it refused)."""
    taken, refused = 0, []
    while records := pending_usage(rt.conn, BATCH):
        try:
            answer: dict[str, Any] = await rt.session.call(rt.client.upload_usage, records)
        except GatewayUnreachable:
            break
        except GatewayError as exc:
            if exc.retryable or exc.caller_refused or exc.status in (401, 403, 408, 409):
                break
            refused.append(str(exc))
        else:
            taken += int(answer.get("accepted", 0)) + int(answer.get("duplicates", 0))
            refused += [str(r.get("problem", {}).get("detail")) for r in answer.get("refused", [])]
        mark_uploaded(rt.conn, [r["id"] for r in records])
        if len(records) < BATCH:
            break
    return taken, refused
