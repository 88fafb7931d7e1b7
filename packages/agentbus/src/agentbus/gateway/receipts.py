"""Send receipts, ``agentbus.receipt.v1`` (04-API-SPEC §4.1, conventions §5.3).

The signature is Ed25519 by the gateway's signing key over
``canonical_json({"id", "msg_id", "seq", "issued_at"})`` (text ids, ``seq`` an integer or null,
``issued_at`` truncated to milliseconds before it is stored so the row renders back to the
signed text); ``kid`` and ``type`` are outside it. ``receipts`` does not record the kid, so a
stored receipt finds its key by trying the (few) public keys.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

from cryptography.exceptions import InvalidSignature
from platformkit.db.scope import Conn
from platformkit.ids import uuid7
from wirekit import canonical_json

from agentbus.gateway.signing import SigningKeys
from agentbus.gateway.store import receipts as store
from agentbus.gateway.wire import b64url_decode, b64url_encode, format_ts, truncate_ms
from agentbus.ids import format_id

RECEIPT_TYPE = "agentbus.receipt.v1"


def signed_bytes(receipt: dict[str, Any]) -> bytes:
    return canonical_json({k: receipt[k] for k in ("id", "msg_id", "seq", "issued_at")})


def _members(row: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": format_id("rcp", row["id"]),
        "msg_id": format_id("msg", row["msg_id"]),
        "seq": row["stream_seq"],
        "issued_at": format_ts(row["issued_at"]),
    }


def find_kid(signing: SigningKeys, row: dict[str, Any]) -> str | None:
    """The signing key whose signature the stored receipt carries."""
    data, signature = signed_bytes(_members(row)), bytes(row["signature"])
    for kid, key in signing.public.items():
        try:
            key.verify(signature, data)
        except InvalidSignature:
            continue
        return kid
    return None


def receipt_view(row: dict[str, Any], kid: str | None) -> dict[str, Any]:
    return {
        "type": RECEIPT_TYPE,
        **_members(row),
        "kid": kid,
        "signature": b64url_encode(bytes(row["signature"])),
    }


async def issue_receipt(
    conn: Conn,
    signing: SigningKeys,
    tenant_id: uuid.UUID,
    msg_id: uuid.UUID,
    seq: int | None,
    token_id: uuid.UUID,
    *,
    message_accepted_at: datetime | None = None,
) -> dict[str, Any]:
    """Sign, insert, and return the receipt as the API shows it; with the message's
    ``message_accepted_at``, ``seq`` is also written into its row where still NULL."""
    receipt_id, issued_at = uuid7(), truncate_ms(datetime.now(UTC))
    members = {
        "id": format_id("rcp", receipt_id),
        "msg_id": format_id("msg", msg_id),
        "seq": seq,
        "issued_at": format_ts(issued_at),
    }
    kid, signature = signing.sign(signed_bytes(members))
    row = await store.insert_receipt(
        conn,
        tenant_id,
        receipt_id=receipt_id,
        msg_id=msg_id,
        stream_seq=seq,
        issued_to_token=token_id,
        issued_at=issued_at,
        signature=signature,
        message_accepted_at=message_accepted_at,
    )
    return receipt_view(row, kid)


def verify_receipt(signing: SigningKeys, receipt: dict[str, Any]) -> bool:
    """Offline check of a receipt as returned by the API, against the known keys."""
    key = signing.public.get(str(receipt.get("kid")))
    if key is None:
        return False
    try:
        key.verify(b64url_decode(receipt["signature"]), signed_bytes(receipt))
    except (InvalidSignature, ValueError, KeyError):
        return False
    return True
