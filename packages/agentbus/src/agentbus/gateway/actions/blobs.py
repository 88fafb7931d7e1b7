"""Claim checks (04-API-SPEC §8, conventions §4 "attachment", data model §1.9): content too large
for a message is uploaded as a blob, sealed with the tenant's data key like a payload, and
messages name it in ``attachments`` (``artifacts`` of a task completion).

- Upload, ``POST /v1/blobs``: the raw bytes, at most the plan's ``blob_bytes`` (AB-5007); the
  object is stored before the row commits; the blob lives ``retention_days``.
- A send that attaches blobs: each must be one of the tenant's blobs not past ``expires_at``
  (AB-2020); they stay locked until the send commits, which counts one more reference for each
  and keeps them at least as long as the message (its ``accepted_at`` plus the retention). So a
  blob past ``expires_at`` is named by no message still within its retention, and
  ``retention.blobs`` deletes it (docs/decisions/0014).
- Download, ``GET /v1/blobs/{blb}``: its uploader; a party of a message that attaches it,
  named by ``?message=msg_...`` (the message's payload is read to check it does); or an
  operator's token with ``read_audit`` or ``admin``, which writes an audit row ``blob.view``
  first. Anyone else, and a blob past ``expires_at``, is AB-8002.

The whole body is held in memory while it is sealed or opened, so ``blob_bytes`` bounds a
request's memory as well (100 MiB by default).
"""

from __future__ import annotations

import hashlib
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

from platformkit.db.scope import Conn, tenant_transaction
from platformkit.ids import uuid7

from agentbus.db import SCOPE
from agentbus.errors import NotFound, RequestInvalid
from agentbus.gateway.actions.audit import record_api_action
from agentbus.gateway.actions.hooks import PendingSend
from agentbus.gateway.actions.messages import find_visible_message, message_id_of
from agentbus.gateway.actions.payloads import load_payload, open_sealed, seal_bytes
from agentbus.gateway.api.auth import Reader
from agentbus.gateway.api.principals import AgentPrincipal
from agentbus.gateway.api.views import ts
from agentbus.gateway.context import Gateway
from agentbus.gateway.domain.errors import BlobReferenceInvalid
from agentbus.gateway.domain.wire import b64url_encode
from agentbus.gateway.store import agents, blobs
from agentbus.ids import InvalidId, format_id, parse_id
from agentbus.store import plans

DEFAULT_BLOB_BYTES = 104_857_600
CONTENT_TYPE_MAX = 127
ATTACHING = ("attachments", "artifacts")
VIEW = "blob.view"
Row = dict[str, Any]


def blob_key(tenant_id: uuid.UUID, blob_id: uuid.UUID) -> str:
    """Data model §3: ``tenants/<tenant>/blobs/<blob_id>``."""
    return f"tenants/{format_id('ten', tenant_id)}/blobs/{format_id('blb', blob_id)}"


def attached_blobs(data: dict[str, Any]) -> list[uuid.UUID]:
    """The distinct blobs a message's ``data`` attaches, in order (the data schema has already
    checked each ``blob`` is a ``blb_`` id)."""
    found: list[uuid.UUID] = []
    for member in ATTACHING:
        for item in data.get(member) or []:
            blob_id = parse_id("blb", item["blob"])
            if blob_id not in found:
                found.append(blob_id)
    return found


async def check_attachments(
    conn: Conn, tenant_id: uuid.UUID, data: dict[str, Any]
) -> dict[uuid.UUID, int]:
    """Send step 5: the blobs ``data`` attaches, each live and the tenant's (AB-2020), locked
    until the send's transaction ends; their sizes by id, in the order attached."""
    wanted = attached_blobs(data)
    if not wanted:
        return {}
    live = await blobs.lock_live(conn, tenant_id, wanted)
    for blob_id in wanted:
        if blob_id not in live:
            raise BlobReferenceInvalid(
                f"{format_id('blb', blob_id)} is not a live blob of this tenant",
                blob=format_id("blb", blob_id),
            )
    return {blob_id: live[blob_id] for blob_id in wanted}


async def reference_attachments(conn: Conn, send: PendingSend) -> None:
    """At the send's insert: one more reference to each blob it attaches, kept at least as long
    as the message is."""
    if not send.blobs:
        return
    assert send.accepted_at is not None
    kept_until = send.accepted_at + timedelta(days=send.tenant["retention_days"])
    await blobs.reference(conn, send.tenant_id, send.blobs, kept_until)


def blob_view(row: Row) -> dict[str, Any]:
    return {
        "id": format_id("blb", row["id"]),
        "size_bytes": row["size_bytes"],
        "sha256": b64url_encode(bytes(row["sha256"])),
        "content_type": row["content_type"],
        "expires_at": ts(row["expires_at"]),
    }


def content_type_of(header: str | None) -> str:
    value = (header or "application/octet-stream").strip()
    if not value or len(value) > CONTENT_TYPE_MAX or not value.isprintable():
        raise RequestInvalid(
            f"Content-Type takes 1 to {CONTENT_TYPE_MAX} printable characters",
            field="content-type",
        )
    return value


async def upload_limit(gw: Gateway, tenant_id: uuid.UUID) -> int:
    async with tenant_transaction(gw.pool, SCOPE, tenant_id) as conn:
        limits = await plans.effective_limits(conn, tenant_id)
    return int(limits.get("blob_bytes") or DEFAULT_BLOB_BYTES)


async def store_blob(
    gw: Gateway, principal: AgentPrincipal, content_type: str, body: bytes
) -> dict[str, Any]:
    """Seal and store the bytes, then commit the row; the blob's view (04 §8)."""
    if not body:
        raise RequestInvalid("a blob needs at least one byte")
    blob_id, tid = uuid7(), principal.tenant_id
    async with tenant_transaction(gw.pool, SCOPE, tid) as conn:
        tenant = await gw.directory.tenant(conn, tid)
        assert tenant is not None  # the principal was just checked against it
        sealed, dek_version = await seal_bytes(conn, gw, tid, format_id("blb", blob_id), body)
        key = blob_key(tid, blob_id)
        await gw.objects.put_many([(key, sealed)])
        row = await blobs.insert_blob(
            conn,
            {
                "id": blob_id, "tenant_id": tid, "uploaded_by": principal.agent_id,
                "s3_key": key, "content_type": content_type, "size_bytes": len(body),
                "sha256": hashlib.sha256(body).digest(), "dek_version": dek_version,
                "expires_at": datetime.now(UTC) + timedelta(days=tenant["retention_days"]),
            },
        )  # fmt: skip
    return blob_view(row)


async def _attaches(gw: Gateway, message: Row, blob_id: uuid.UUID) -> bool:
    return blob_id in attached_blobs(await load_payload(gw, message))


async def open_blob(
    gw: Gateway,
    who: Reader,
    blob_ref: str,
    message_ref: str | None,
    *,
    client: tuple[str | None, str | None] = (None, None),
) -> tuple[Row, bytes]:
    """The blob's row and its bytes, for whoever may read it (see the module); AB-8002 for
    anyone else, exactly as for a blob that does not exist."""
    try:
        blob_id = parse_id("blb", blob_ref)
    except InvalidId as exc:
        raise NotFound(f"no blob {blob_ref}") from exc
    missing = NotFound(f"no blob {blob_ref}")
    message = None
    async with tenant_transaction(gw.pool, SCOPE, who.tenant_id) as conn:
        found = await blobs.get_blob(conn, who.tenant_id, blob_id)
        row = found if found is not None and found["expires_at"] > datetime.now(UTC) else None
        if isinstance(who, AgentPrincipal):
            if row is None or who.agent_id != row["uploaded_by"]:
                if message_ref is None:  # the same answer whether the blob exists or not
                    raise NotFound(
                        f"no blob {blob_ref} of yours; one a message attached is read with "
                        "?message=msg_..."
                    )
                if row is None:
                    raise missing
                message = await find_visible_message(conn, who, message_id_of(message_ref))
        else:
            if row is None:
                raise missing
            uploader = await agents.get_agent(conn, who.tenant_id, row["uploaded_by"])
            if uploader is None or who.workspace_id not in (None, uploader["workspace_id"]):
                raise missing
            await record_api_action(
                conn, gw, who, VIEW, target_type="blob", target_id=format_id("blb", blob_id),
                client=client,
            )  # fmt: skip
    if message is not None and not await _attaches(gw, message, blob_id):
        raise missing
    plain = await open_sealed(
        gw, who.tenant_id, row["s3_key"], format_id("blb", blob_id), bytes(row["sha256"])
    )
    return row, plain
