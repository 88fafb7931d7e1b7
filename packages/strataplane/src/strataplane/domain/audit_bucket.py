"""Audit events in an object store: the names of the objects, from which the export's progress
is read back (the bucket is its own cursor; schema: audit_event, no audit_sink row).

Each object holds the tenant's events ``first`` .. ``last`` (seq, inclusive) as JSON Lines, at
``<prefix>/<tenant>/<first>-<last>.jsonl`` with both numbers zero-padded to 20 digits, so the
names sort as the events do and the greatest ``last`` under a tenant's folder is how far its
export got."""

from __future__ import annotations

import re
from collections.abc import Iterable
from urllib.parse import urlsplit
from uuid import UUID

from platformkit.storable import unstorable_reason

__all__ = ["BucketInvalid", "bucket_location", "exported_through", "object_key", "span_of",
           "tenant_folder"]  # fmt: skip

_WIDTH = 20
_NAME = re.compile(r"(\d{20})-(\d{20})\.jsonl")


MAX_URL = 2048


class BucketInvalid(ValueError):
    """A bucket URL the export cannot use; the message says why."""


def bucket_location(url: str) -> tuple[str, str]:
    """``(root, prefix)`` of a bucket URL (``s3://bucket/prefix``; a ``file://`` URL is its own
    root): the store to open and the folder under it. ``BucketInvalid`` for text that is not
    such a URL, or a prefix an object name cannot hold."""
    reason = unstorable_reason(url)
    if reason is not None:
        raise BucketInvalid(reason)
    if len(url) > MAX_URL:
        raise BucketInvalid(f"longer than {MAX_URL} characters")
    try:
        parts = urlsplit(url)
    except ValueError as exc:
        raise BucketInvalid(str(exc)) from None
    if not parts.scheme or (parts.scheme != "file" and not parts.netloc):
        raise BucketInvalid("not a URL such as s3://bucket/prefix")
    if parts.scheme == "file":
        return url, ""
    prefix = parts.path.strip("/")
    if prefix and any(seg in ("", ".", "..") or "%" in seg for seg in prefix.split("/")):
        raise BucketInvalid("the prefix holds an empty, '.', '..' or percent-encoded segment")
    return f"{parts.scheme}://{parts.netloc}", prefix


def tenant_folder(prefix: str, tenant_id: UUID) -> str:
    prefix = prefix.strip("/")
    return f"{prefix}/{tenant_id}" if prefix else str(tenant_id)


def object_key(prefix: str, tenant_id: UUID, first: int, last: int) -> str:
    if not 0 < first <= last < 10**_WIDTH:
        raise ValueError(f"not a span of seqs: {first}-{last}")
    return f"{tenant_folder(prefix, tenant_id)}/{first:0{_WIDTH}d}-{last:0{_WIDTH}d}.jsonl"


def span_of(key: str) -> tuple[int, int] | None:
    """The (first, last) seqs of an object this export named; None for any other object."""
    found = _NAME.fullmatch(key.rsplit("/", 1)[-1])
    if found is None:
        return None
    first, last = int(found[1]), int(found[2])
    return (first, last) if 0 < first <= last else None


def exported_through(keys: Iterable[str]) -> int:
    """The greatest seq the objects hold: the export goes on after it (0 for none)."""
    return max((span[1] for k in keys if (span := span_of(k)) is not None), default=0)
