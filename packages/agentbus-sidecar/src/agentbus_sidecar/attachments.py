"""Attachments (04-API-SPEC.md §8): files uploaded as blobs before the message that names them
is queued, and blobs fetched back, their digest checked against the gateway's ``Digest``."""

from __future__ import annotations

import base64
import hashlib
import mimetypes
from pathlib import Path
from typing import Any

from agentbus_sidecar.errors import EnvelopeError, SidecarError
from agentbus_sidecar.runtime import Runtime

NAME_MAX = 255


def content_type_of(path: Path) -> str:
    guessed, _encoding = mimetypes.guess_type(path.name)
    return guessed or "application/octet-stream"


async def upload_files(rt: Runtime, paths: list[Path]) -> list[dict[str, Any]]:
    """Each file uploaded as a blob; the ``attachments`` items that name them. This needs the
    gateway: a message with attachments is never queued before its files are uploaded."""
    attachments = []
    for path in paths:
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise EnvelopeError(f"cannot read {path}: {exc.strerror or exc}") from exc
        content_type = content_type_of(path)
        blob = await rt.session.call(rt.client.upload_blob, data, content_type)
        attachments.append(
            {"blob": blob["id"], "name": path.name[:NAME_MAX], "content_type": content_type}
        )
    return attachments


async def fetch_blob(rt: Runtime, blob_id: str, message: str | None) -> tuple[bytes, str]:
    """The blob's bytes and content type; a body that does not match the ``Digest`` the
    gateway sent is refused."""
    response = await rt.session.call(rt.client.download_blob, blob_id, message)
    data = response.content
    digest = response.headers.get("Digest", "")
    expected = "sha-256=" + base64.b64encode(hashlib.sha256(data).digest()).decode()
    if digest != expected:
        raise SidecarError(f"{blob_id} arrived damaged: its digest does not match")
    return data, response.headers.get("Content-Type", "application/octet-stream")
