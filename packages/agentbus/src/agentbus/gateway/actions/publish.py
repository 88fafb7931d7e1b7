"""Publishing accepted messages to JetStream (05-DELIVERY-SEMANTICS §3 steps 5-6, §12.1).

The NATS copy is the signed envelope with ``data`` replaced by ``{"$ref": payload_ref}``
(data model §4), rebuilt from the ``messages`` row alone (conventions §3.1), so the send path,
the replay path, the reconciler and a redrive all publish it without reading the object store.
With ``inline_payloads`` the send path adds the sealed payload as ``$sealed`` (base64url)
beside ``$ref`` when it is small enough (``payloads.INLINE_MAX_BYTES``); the other paths
publish without it, and the delivery reads the store for their copies. Headers:
``Nats-Msg-Id`` (``msg_<hex>``, or with a redrive suffix), ``traceparent``, and ``Nats-TTL``
(seconds to ``expires_at``, rounded up, at least 1) when the message expires. On PubAck the
sequence is written where it is still NULL.
"""

from __future__ import annotations

import logging
import math
import uuid
from datetime import UTC, datetime
from typing import Any

from platformkit.db.scope import Conn, tenant_transaction
from wirekit import canonical_json

from agentbus.actions import tenants as tenant_actions
from agentbus.actions.context import Actor, Ctx
from agentbus.db import SCOPE
from agentbus.gateway.context import Gateway
from agentbus.gateway.domain.schemas import TASK_LIFECYCLE, TASK_REQUEST
from agentbus.gateway.domain.wire import b64url_encode, format_ts, uuid7_time
from agentbus.gateway.store import messages
from agentbus.ids import format_id
from agentbus.store import plans, tenants

log = logging.getLogger(__name__)

_OPTIONAL = (
    ("replyto", "reply_to"),
    ("idempotencykey", "idempotency_key"),
    ("capability", "capability"),
    ("capabilityver", "capability_ver"),
)


def rebuild_envelope(row: dict[str, Any], data: dict[str, Any]) -> dict[str, Any]:
    """The envelope the sender signed, from a ``messages`` row (with ``from_address``)."""
    env: dict[str, Any] = {
        "specversion": "1.0",
        "id": format_id("msg", row["id"]),
        "source": row["from_address"],
        "type": row["type"],
        "time": format_ts(uuid7_time(row["id"])),
        "datacontenttype": "application/json",
        "dataschema": row["schema_url"],
        "recipient": row["to_address"],
        "conversation": format_id("cnv", row["conversation_id"]),
        "priority": row["priority"],
        "traceparent": row["traceparent"],
        "keyid": format_id("key", row["signing_key_id"]),
        "signature": b64url_encode(bytes(row["sig"])),
        "data": data,
    }
    if row["type"] == TASK_REQUEST:
        env["subject"] = format_id("tsk", row["id"])
    elif row["type"] in TASK_LIFECYCLE and row["correlation_id"] is not None:
        env["subject"] = format_id("tsk", row["correlation_id"])
    if row["correlation_id"] is not None:
        env["correlation"] = format_id("msg", row["correlation_id"])
    for attribute, column in _OPTIONAL:
        if row[column] is not None:
            env[attribute] = row[column]
    if row["expires_at"] is not None:
        env["expires"] = format_ts(row["expires_at"])
    return env


def nats_body(row: dict[str, Any], sealed: bytes | None = None) -> bytes:
    """The JetStream copy of a row; ``sealed``: its sealed payload, to carry inline."""
    data = {"$ref": row["payload_ref"]}
    if sealed is not None:
        data["$sealed"] = b64url_encode(sealed)
    return canonical_json(rebuild_envelope(row, data))


def nats_headers(row: dict[str, Any], now: datetime | None = None) -> dict[str, str]:
    headers = {"traceparent": str(row["traceparent"])}
    if row["expires_at"] is not None:
        left = (row["expires_at"] - (now or datetime.now(UTC))).total_seconds()
        headers["Nats-TTL"] = str(max(1, math.ceil(left)))
    return headers


async def ensure_tenant_stream(gw: Gateway, tenant_id: uuid.UUID) -> None:
    """The tenant's stream with ``max_age`` = retention and ``max_bytes`` = ``stream_bytes``."""
    if gw.broker.knows_stream(tenant_id):
        return
    async with tenant_transaction(gw.pool, SCOPE, tenant_id) as conn:
        tenant = await tenants.get_tenant(conn, tenant_id)
        limits = await plans.effective_limits(conn, tenant_id)
    if tenant is None:
        raise LookupError(f"no tenant {tenant_id}")
    await create_tenant_stream(gw, tenant, limits.get("stream_bytes"))


async def create_tenant_stream(
    gw: Gateway, tenant: dict[str, Any], stream_bytes: int | None
) -> None:
    """``ensure_tenant_stream`` for a caller that holds the tenant row and its ``stream_bytes``:
    the stream, and when this process had to create it, what a lost one held sent out again."""
    if await gw.broker.ensure_stream(
        tenant["id"], retention_days=tenant["retention_days"], max_bytes=stream_bytes
    ):
        await _republish_lost(gw, tenant)


async def _republish_lost(gw: Gateway, tenant: dict[str, Any]) -> None:
    """After this process created the stream of an active tenant: what the tenant's rows say
    was published and is still waiting is not in the new stream (JetStream lost it, 05 §13.2),
    so it goes out again with the reconciler; a new tenant has no such rows."""
    if tenant["status"] != "active":
        return
    system = Ctx(gw.pool, Actor.system("gateway:stream-created"))
    count = await tenant_actions.republish_undelivered(
        system, tenant["id"], reason="the tenant stream was missing and created again",
        record_none=False,
    )  # fmt: skip
    if count:
        log.warning("stream of tenant %s created again: %d waiting messages go out again",
                    tenant["id"], count)  # fmt: skip


async def publish_message(
    gw: Gateway,
    row: dict[str, Any],
    *,
    msg_id_header: str | None = None,
    record_seq: bool = True,
    sealed: bytes | None = None,
) -> int | None:
    """Publish a committed ``messages`` row (with ``from_address`` and ``to_subject``) and
    record its sequence; the sequence, or None when JetStream did not confirm (the row then
    waits for the reconciler, and the tenant stream is verified again before the next publish,
    so one that JetStream lost is created again). Never call it inside the transaction that
    inserts the row. With ``record_seq=False`` the caller writes the sequence itself, as the
    send path does in the statement that inserts the receipt (``receipts.issue_receipt``).
    ``sealed``: the payload to carry inline (``nats_body``)."""
    if not gw.broker.connected or row.get("to_subject") is None:
        return None
    tenant_id: uuid.UUID = row["tenant_id"]
    try:
        await ensure_tenant_stream(gw, tenant_id)
    except Exception as exc:
        log.warning("stream of tenant %s not ready: %s", tenant_id, exc)
        return None
    ack = await gw.broker.publish(
        row["to_subject"],
        nats_body(row, sealed),
        msg_id=msg_id_header or format_id("msg", row["id"]),
        headers=nats_headers(row),
    )
    if ack is None:
        gw.broker.forget(tenant_id)  # a stream JetStream lost is created again next time
        return None
    if record_seq:
        async with tenant_transaction(gw.pool, SCOPE, tenant_id) as conn:
            await record_stream_seq(conn, row, int(ack.seq))
    return int(ack.seq)


async def record_stream_seq(conn: Conn, row: dict[str, Any], seq: int) -> None:
    """Step 6 of 05 §3: write the PubAck's sequence where it is still NULL."""
    await messages.set_stream_seq(conn, row["tenant_id"], row["id"], row["accepted_at"], seq)
    row["stream_seq"] = row.get("stream_seq") or seq
