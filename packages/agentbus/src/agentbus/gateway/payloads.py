"""Message payloads at rest (data model §4, §5): ``canonical_json(data)`` sealed with the
tenant's active data key and stored at ``payload_ref``.

Sealing is the kernel's ``Envelope`` over ``tenant_keys`` (AES-256-GCM, random nonce); its
associated data is the sealed header plus ``canonical_json([tenant_id, "msg_<hex>"])``, i.e.
the message id and the tenant id, so a ciphertext cannot be moved to another message or tenant.
The data key version is carried in the ciphertext and stored as ``messages.dek_version``.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from typing import Any

from platformkit.crypto import (
    DataKeyUnavailableError,
    DecryptionError,
    new_data_key,
    seal,
    sealed_key_id,
)
from platformkit.db.scope import Conn

from agentbus.gateway.context import Gateway
from agentbus.gateway.errors import KeyUnavailable, PayloadIntegrityFailed
from agentbus.gateway.objectstore import payload_key
from agentbus.ids import format_id
from agentbus.keys import store_wrapped_key


async def seal_payload(
    conn: Conn, gw: Gateway, tenant_id: uuid.UUID, msg_id: uuid.UUID, plaintext: bytes
) -> tuple[str, bytes, int]:
    """``(payload_ref, sealed, dek_version)``: the object to upload under ``payload_ref``. The
    key is derived from the id, so a retried upload overwrites the same object (AB-9020 when
    the data key cannot be unwrapped; the upload's failure is AB-9004).

    ``conn`` is the caller's tenant transaction (the send's): the tenant's active data key is
    read on it (or, for a tenant without one, created in it), so the send path never holds one
    pooled connection while waiting for another. This is ``Envelope.encrypt`` on that
    transaction."""
    stored = await gw.data_keys.active_in(conn, tenant_id)
    if stored is None:
        stored = await store_wrapped_key(conn, tenant_id, new_data_key(gw.keyring, tenant_id))
    try:
        data_key = gw.crypto.unwrap(tenant_id, stored)
    except DataKeyUnavailableError as exc:
        raise KeyUnavailable("the tenant data key cannot be unwrapped") from exc
    sealed = seal(data_key, plaintext, tenant_id=tenant_id, owner=format_id("msg", msg_id))
    return payload_key(tenant_id, msg_id), sealed, sealed_key_id(sealed)


async def load_payload_bytes(gw: Gateway, row: dict[str, Any]) -> bytes:
    """The plaintext of a ``messages`` row, checked against ``payload_sha256`` (AB-9021)."""
    sealed = await gw.objects.get(row["payload_ref"])
    owner = format_id("msg", row["id"])
    try:
        plain = await gw.crypto.decrypt(row["tenant_id"], sealed, owner=owner)
    except DataKeyUnavailableError as exc:
        raise KeyUnavailable("the tenant data key cannot be unwrapped") from exc
    except DecryptionError as exc:
        raise PayloadIntegrityFailed(f"payload of {owner} does not decrypt") from exc
    if hashlib.sha256(plain).digest() != bytes(row["payload_sha256"]):
        raise PayloadIntegrityFailed(f"payload of {owner} does not match payload_sha256")
    return plain


async def load_payload(gw: Gateway, row: dict[str, Any]) -> dict[str, Any]:
    """The ``data`` of a ``messages`` row, for re-inlining into its envelope on delivery."""
    data: dict[str, Any] = json.loads(await load_payload_bytes(gw, row))
    return data
