"""Message payloads and blobs at rest (data model §4, §5): ``canonical_json(data)`` sealed
with the tenant's active data key and stored at ``payload_ref``; a blob's bytes likewise at its
``s3_key``.

Sealing is the kernel's sealed format under ``tenant_keys`` (``agentbus.tenant_crypto``:
AES-256-GCM, random nonce, the key unwrapped by the tenant's KEK provider); its
associated data is the sealed header plus ``canonical_json([tenant_id, "msg_<hex>"])``, i.e.
the message id and the tenant id, so a ciphertext cannot be moved to another message or tenant.
The data key version is carried in the ciphertext and stored as ``messages.dek_version``.

With ``inline_payloads`` on, the sealed bytes of a payload under ``INLINE_MAX_BYTES`` also travel
inside its JetStream copy (data model §4): the delivery opens them there and reads no object. The
object store keeps the copy of record; an inline copy that does not open to the row's digest is
read from the store instead. A payload object that is missing is an integrity failure (AB-9021),
as a digest mismatch is.
"""

from __future__ import annotations

import hashlib
import json
import logging
import uuid
from typing import Any

from platformkit.crypto import DataKeyUnavailableError, DecryptionError, seal, sealed_key_id
from platformkit.db.scope import Conn

from agentbus.gateway.context import Gateway
from agentbus.gateway.domain.errors import KeyUnavailable, PayloadIntegrityFailed
from agentbus.gateway.metrics import PAYLOAD_OPENS
from agentbus.gateway.store.objectstore import ObjectMissing, payload_key
from agentbus.ids import format_id

log = logging.getLogger(__name__)

INLINE_MAX_BYTES = 64 * 1024
"""Sealed payloads below this size travel inside their JetStream copy when ``inline_payloads``
is on (data model §4)."""


async def seal_bytes(
    conn: Conn, gw: Gateway, tenant_id: uuid.UUID, owner: str, plaintext: bytes
) -> tuple[bytes, int]:
    """``(sealed, dek_version)``: ``plaintext`` sealed with the tenant's active data key for
    ``owner`` (the ``msg_`` or ``blb_`` id it belongs to); AB-9020 when the key cannot be
    unwrapped.

    ``conn`` is the caller's tenant transaction (the send's): the tenant's active data key is
    read on it (or, for a tenant without one, created in it), so the send path never holds one
    pooled connection while waiting for another."""
    try:
        data_key = await gw.crypto.active_key_in(conn, tenant_id)
    except DataKeyUnavailableError as exc:
        raise KeyUnavailable("the tenant data key cannot be unwrapped") from exc
    sealed = seal(data_key, plaintext, tenant_id=tenant_id, owner=owner)
    return sealed, sealed_key_id(sealed)


async def seal_payload(
    conn: Conn, gw: Gateway, tenant_id: uuid.UUID, msg_id: uuid.UUID, plaintext: bytes
) -> tuple[str, bytes, int]:
    """``(payload_ref, sealed, dek_version)``: the object to upload under ``payload_ref``. The
    key is derived from the id, so a retried upload overwrites the same object (the upload's
    failure is AB-9004)."""
    sealed, dek_version = await seal_bytes(conn, gw, tenant_id, format_id("msg", msg_id), plaintext)
    return payload_key(tenant_id, msg_id), sealed, dek_version


async def open_sealed(
    gw: Gateway, tenant_id: uuid.UUID, key: str, owner: str, sha256: bytes
) -> bytes:
    """The plaintext of the object under ``key``, sealed for ``owner`` and checked against its
    ``sha256``: AB-9021 when the object is missing or does not open to it; AB-9020 when the data
    key cannot be unwrapped."""
    try:
        sealed = await gw.objects.get(key)
    except ObjectMissing as exc:
        raise PayloadIntegrityFailed(f"the object of {owner} is missing") from exc
    return await _open(gw, tenant_id, sealed, owner, sha256)


async def _open(
    gw: Gateway, tenant_id: uuid.UUID, sealed: bytes, owner: str, sha256: bytes
) -> bytes:
    try:
        plain = await gw.crypto.decrypt(tenant_id, sealed, owner=owner)
    except DataKeyUnavailableError as exc:
        raise KeyUnavailable("the tenant data key cannot be unwrapped") from exc
    except DecryptionError as exc:
        raise PayloadIntegrityFailed(f"the sealed bytes of {owner} do not decrypt") from exc
    if hashlib.sha256(plain).digest() != sha256:
        raise PayloadIntegrityFailed(f"the sealed bytes of {owner} do not match its sha256")
    return plain


async def load_payload_bytes(
    gw: Gateway, row: dict[str, Any], inline: bytes | None = None
) -> bytes:
    """The plaintext of a ``messages`` row, checked against ``payload_sha256`` (AB-9021):
    from ``inline``, the sealed bytes its JetStream copy carried, when they open to it, else
    from the object store."""
    tenant_id, owner = row["tenant_id"], format_id("msg", row["id"])
    sha256 = bytes(row["payload_sha256"])
    if inline is not None:
        try:
            plain = await _open(gw, tenant_id, inline, owner, sha256)
        except PayloadIntegrityFailed as exc:
            log.warning("%s inline; reading the object store's copy", exc)
        else:
            PAYLOAD_OPENS.labels("inline").inc()
            return plain
    plain = await open_sealed(gw, tenant_id, row["payload_ref"], owner, sha256)
    PAYLOAD_OPENS.labels("store").inc()
    return plain


async def load_payload(
    gw: Gateway, row: dict[str, Any], inline: bytes | None = None
) -> dict[str, Any]:
    """The ``data`` of a ``messages`` row, for re-inlining into its envelope on delivery."""
    data: dict[str, Any] = json.loads(await load_payload_bytes(gw, row, inline))
    return data
