"""Send receipts, ``agentbus.receipt.v1`` (04-API-SPEC §4.1, conventions §5.3).

The signature is Ed25519 by the gateway's signing key over
``canonical_json({"id", "msg_id", "seq", "issued_at"})`` (text ids, ``seq`` an integer or null,
``issued_at`` truncated to milliseconds before it is stored so the row renders back to the
signed text); ``kid`` and ``type`` are outside it. ``receipts`` does not record the kid, so a
stored receipt finds its key by trying the (few) public keys.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from cryptography.exceptions import InvalidSignature
from platformkit.db.scope import Conn, Pool
from platformkit.ids import uuid7
from wirekit import canonical_json

from agentbus.gateway.actions.signing import SigningKeys
from agentbus.gateway.domain.wire import b64url_decode, b64url_encode, format_ts, truncate_ms
from agentbus.gateway.store import receipts as store
from agentbus.gathered import Gathered
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


@dataclass(frozen=True)
class ReceiptFor:
    """One message to issue a receipt for: its sequence (None while unconfirmed) and, for a
    message just accepted, its ``accepted_at``, so the sequence is written into its row."""

    msg_id: uuid.UUID
    seq: int | None
    message_accepted_at: datetime | None = None


def sign_receipts(
    signing: SigningKeys, token_id: uuid.UUID, items: list[ReceiptFor]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """One signed receipt per item: the rows to record (``store.insert_receipts``) and the
    receipts as the API shows them, both in the order of ``items``."""
    issued_at = truncate_ms(datetime.now(UTC))
    rows, views = [], []
    for item in items:
        row: dict[str, Any] = {"id": uuid7(), "msg_id": item.msg_id, "stream_seq": item.seq,
               "issued_at": issued_at, "message_accepted_at": item.message_accepted_at,
               "issued_to_token": token_id}  # fmt: skip
        kid, row["signature"] = signing.sign(signed_bytes(_members(row)))
        rows.append(row)
        views.append(receipt_view(row, kid))
    return rows, views


async def issue_receipts(
    conn: Conn,
    signing: SigningKeys,
    tenant_id: uuid.UUID,
    token_id: uuid.UUID,
    items: list[ReceiptFor],
) -> list[dict[str, Any]]:
    """Sign and insert one receipt per item on ``conn``, in one statement; the receipts as
    the API shows them, in the order of ``items``."""
    rows, views = sign_receipts(signing, token_id, items)
    await store.insert_receipts(conn, tenant_id, rows)
    return views


@dataclass(eq=False)
class _Batch:
    rows: list[dict[str, Any]]


class ReceiptWrites:
    """Where the send path records its receipts after the publish: the receipts of the sends
    of a tenant that finish while the tenant's previous write is under way are recorded by the
    next one, one ``record_receipts`` call for all of them (each row names its own token), so
    a thousand agents each sending a message at a time do not pay a transaction each. A send
    is answered once its receipts are committed, as before."""

    def __init__(self, pool: Pool) -> None:
        self._pool = pool
        self.gathered: Gathered[_Batch, bool] = Gathered(self._write)

    async def record(self, tenant_id: uuid.UUID, rows: list[dict[str, Any]]) -> None:
        await self.gathered.ask(tenant_id, _Batch(rows))

    async def _write(self, tenant_id: uuid.UUID, batches: list[_Batch]) -> dict[_Batch, bool]:
        async with self._pool.connection() as conn:  # autocommit: one statement, committed
            await store.insert_receipts(conn, tenant_id, [r for b in batches for r in b.rows])
        return dict.fromkeys(batches, True)


async def issue_receipt(
    conn: Conn,
    signing: SigningKeys,
    tenant_id: uuid.UUID,
    msg_id: uuid.UUID,
    seq: int | None,
    token_id: uuid.UUID,
) -> dict[str, Any]:
    """One receipt, for a message whose row already holds what it has (a replay)."""
    (receipt,) = await issue_receipts(conn, signing, tenant_id, token_id, [ReceiptFor(msg_id, seq)])
    return receipt


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
