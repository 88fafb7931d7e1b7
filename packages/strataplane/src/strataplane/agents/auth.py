"""Agent credentials on the hot path: ``Authorization: Bearer spt_...`` (Telegraf 1.39+,
TELEGRAF_CONTROLLER_TOKEN, and outputs.heartbeat) or ``Token spt_...`` (INFLUX_TOKEN), and
``Bearer spv_...`` (Vector's http provider and heartbeat sink), ``ApiKey spe_...`` (Elastic
Agent, handed over by agents/elastic.py). Each endpoint checks that the credential's agent is of
its kind.

Lookups by sha256 are cached for ``ttl`` seconds, unknown hashes too (briefly), so a poll costs
no database round trip; concurrent misses share one query (agents/coalesce.py). A revocation
reaches every replica at once by NOTIFY; a lookup that was reading while a revocation arrived
answers its requests but caches nothing, and the TTL bounds the damage of a lost notice.
"""

from __future__ import annotations

import hashlib
import ipaddress
import time
from collections.abc import Sequence
from dataclasses import dataclass
from uuid import UUID

from platformkit.db.scope import Pool, platform_transaction

from strataplane.agents.coalesce import Coalescer
from strataplane.db import SCOPE
from strataplane.store import fleet_agents

_PREFIXES = ("spt_", "spv_", "spe_")
_PREFIX_LENGTH = 4
_BODY = 52  # 32 bytes in unpadded base32
_NEGATIVE_TTL = 5.0


@dataclass(frozen=True, slots=True)
class AgentIdentity:
    tenant_id: UUID
    agent_id: UUID


def credential_of(header: str | None) -> str | None:
    """The token of ``Bearer <t>`` or ``Token <t>``, when it looks like an agent credential."""
    if not header:
        return None
    scheme, _, token = header.partition(" ")
    token = token.strip()
    if scheme.lower() not in ("bearer", "token") or not token.startswith(_PREFIXES):
        return None
    return token if len(token) == _PREFIX_LENGTH + _BODY else None


type Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def client_address(peer: str | None, forwarded_for: str, proxies: list[Network]) -> str | None:
    """The agent's address: the peer, or, when the peer is a trusted proxy, the nearest
    X-Forwarded-For hop that is not one (from anyone else the header is ignored)."""

    def trusted(address: str) -> bool:
        try:
            ip = ipaddress.ip_address(address)
        except ValueError:
            return False
        return any(ip in net for net in proxies)

    if peer is None or not trusted(peer):
        return peer
    hops = [h.strip() for h in forwarded_for.split(",") if h.strip()]
    for hop in reversed(hops):
        if not trusted(hop):
            try:
                return str(ipaddress.ip_address(hop))
            except ValueError:
                return peer
    return peer


class CredentialCache:
    def __init__(self, pool: Pool, ttl: float) -> None:
        self._pool = pool
        self._ttl = ttl
        self._entries: dict[bytes, tuple[float, AgentIdentity | None]] = {}
        self._epoch = 0  # bumped by every revocation
        self._loader = Coalescer[bytes, AgentIdentity](self._fetch)

    async def identify(self, header: str | None) -> AgentIdentity | None:
        token = credential_of(header)
        if token is None:
            return None
        digest = hashlib.sha256(token.encode()).digest()
        entry = self._entries.get(digest)
        if entry is not None and entry[0] > time.monotonic():
            return entry[1]
        return await self._loader.load(digest)

    async def _fetch(self, digests: Sequence[bytes]) -> dict[bytes, AgentIdentity]:
        epoch = self._epoch
        async with platform_transaction(self._pool, SCOPE) as conn:
            creds = await fleet_agents.lookup_credentials(conn, digests)
        found = {
            digest: AgentIdentity(cred.tenant_id, cred.agent_instance_id)
            for digest, cred in creds.items()
            if cred.revoked_at is None
        }
        if epoch == self._epoch:  # else a revocation came during the read: keep nothing
            if len(self._entries) > 200_000:
                self._entries.clear()
            now = time.monotonic()
            for digest in digests:
                identity = found.get(digest)
                ttl = self._ttl if identity is not None else _NEGATIVE_TTL
                self._entries[digest] = (now + ttl, identity)
        return found

    def revoke(self, digest_hex: str) -> None:
        self._epoch += 1
        self._entries.pop(bytes.fromhex(digest_hex), None)

    def clear(self) -> None:
        self._epoch += 1
        self._entries.clear()
