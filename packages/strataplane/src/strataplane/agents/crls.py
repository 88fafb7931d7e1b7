"""The certificate revocation lists of the tenants' trust anchors (``trust_anchor.crl_url``),
fetched by each server process when a client certificate is checked, verified against the
anchor (issuer and signature) and kept until the list's nextUpdate (at least
``STRATAPLANE_FLEET_CRL_MIN_REFRESH``, 60 s, at most an hour). A fetch that fails keeps the last
good list and is tried again after that floor; an anchor whose list was never fetched has no
known answer. URLs obey the egress rules
(``platformkit.http.egress``), widened by ``STRATAPLANE_FLEET_EGRESS_ALLOW``."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from uuid import UUID

import httpx
from cryptography import x509
from platformkit.http.egress import Network, egress_problem

from strataplane.domain.certificates import (
    MAX_CRL,
    crl_problem,
    crl_refresh_at,
    is_revoked,
    parse_crl,
)
from strataplane.store.trust_anchors import TrustAnchor

__all__ = ["CrlCache", "Revocation"]

log = logging.getLogger(__name__)
_TIMEOUT = 5.0

type Revocation = bool | None  # revoked, not revoked, or unknown (no list answers)


@dataclass
class _Entry:
    crl: x509.CertificateRevocationList | None
    refresh_at: datetime


class CrlCache:
    def __init__(self, allow: Sequence[Network] = (), min_refresh: float = 60.0) -> None:
        self._allow, self._least = tuple(allow), min_refresh
        self._entries: dict[tuple[UUID, str, str], _Entry] = {}
        self._locks: dict[tuple[UUID, str, str], asyncio.Lock] = {}

    async def revoked(self, anchor: TrustAnchor, cert: x509.Certificate) -> Revocation:
        """Whether the anchor's list names ``cert``; False for an anchor without a list, None
        when no list was fetched or the list is another CA's than the certificate's issuer."""
        if anchor.crl_url is None:
            return False
        crl = await self._list(anchor, anchor.crl_url)
        return None if crl is None else is_revoked(crl, cert)

    async def _list(self, anchor: TrustAnchor, url: str) -> x509.CertificateRevocationList | None:
        key = (anchor.id, url, anchor.ca_pem)
        entry = self._entries.get(key)
        if entry is not None and datetime.now(UTC) < entry.refresh_at:
            return entry.crl
        async with self._locks.setdefault(key, asyncio.Lock()):
            entry = self._entries.get(key)
            now = datetime.now(UTC)
            if entry is not None and now < entry.refresh_at:
                return entry.crl
            fetched, problem = await self._fetch(url, anchor.ca_pem)
            if fetched is not None:
                entry = _Entry(fetched, crl_refresh_at(fetched, now, least=self._least))
            else:
                log.warning("CRL of trust anchor %s (%s): %s", anchor.name, url, problem)
                retry = now + timedelta(seconds=self._least)
                entry = _Entry(entry.crl if entry is not None else None, retry)
            self._entries[key] = entry
            return entry.crl

    async def _fetch(
        self, url: str, anchor_pem: str
    ) -> tuple[x509.CertificateRevocationList | None, str | None]:
        problem = await egress_problem(url, self._allow)
        if problem is not None:
            return None, problem
        try:
            async with (
                httpx.AsyncClient(timeout=_TIMEOUT, follow_redirects=False) as client,
                client.stream("GET", url) as reply,
            ):
                if reply.status_code != 200:
                    return None, f"HTTP {reply.status_code}"
                body = bytearray()
                async for chunk in reply.aiter_bytes():
                    body += chunk
                    if len(body) > MAX_CRL:
                        return None, f"larger than {MAX_CRL} bytes"
        except httpx.HTTPError as exc:
            return None, f"{type(exc).__name__}: {exc}"
        crl = parse_crl(bytes(body))
        if crl is None:
            return None, "not a CRL (DER or PEM)"
        problem = crl_problem(crl, anchor_pem)
        return (None, problem) if problem is not None else (crl, None)
