"""Telegraf class mode on the agents' front (docs/strataplane/agents/telegraf.md §7).

Every member of a class runs with the class's enrollment token (``spn_``, mode ``class``) as
its credential. A config request carries no instance id, so the server answers it with the
class config (``class_default``: one render per class, Telegraf version and revision at the
release pointer) unless the source address resolves to members of that version whose own
desired artifact differs from it: one such artifact is served instead; several make the
address ambiguous (``ambiguous_address``) and the class config is served. ``class_served``
keeps what each address last got, for the HEAD rule of §5. Heartbeats name their member by
host name; the first heartbeat of a new host makes it a member, and each heartbeat proves what
that member applied, as for an enrolled Telegraf.

Class polls cost one short transaction each (the per-agent path's caches do not apply: the
answer depends on the address).
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any
from uuid import UUID

import psycopg
from platformkit import boundedjson
from platformkit.db.scope import Conn, Pool, platform_transaction, tenant_transaction

from strataplane import errors
from strataplane.actions import fleet_errors as fe
from strataplane.actions.access import check_tenant
from strataplane.actions.artifact_checks import check_artifacts, failed
from strataplane.actions.fleet_enrollment import join_class
from strataplane.actions.fleet_rule import load_rule
from strataplane.agents.front import AgentRequest, Reply
from strataplane.agents.heartbeat import BadHeartbeat, parse_heartbeat
from strataplane.db import SCOPE
from strataplane.domain.fleet_status import http_date, telegraf_version
from strataplane.domain.hostnames import is_host_name
from strataplane.render.cache import supported_version
from strataplane.render.service import RENDERER
from strataplane.store import fleet_class, fleet_enrollment
from strataplane.store.fleet_enrollment import EnrollmentToken

if TYPE_CHECKING:
    from strataplane.agents.runtime import FleetRuntime

_PREFIX = "spn_"
_LENGTH = 4 + 52  # spn_ + 32 bytes in unpadded base32
_NEGATIVE_TTL = 5.0
_CHALLENGE = {"WWW-Authenticate": 'Bearer realm="strataplane"'}


def class_credential_of(header: str | None) -> str | None:
    """The token of ``Bearer spn_...`` or ``Token spn_...``."""
    if not header:
        return None
    scheme, _, token = header.partition(" ")
    token = token.strip()
    if scheme.lower() not in ("bearer", "token") or not token.startswith(_PREFIX):
        return None
    return token if len(token) == _LENGTH else None


def _usable(token: EnrollmentToken | None) -> EnrollmentToken | None:
    if token is None or token.mode != "class" or token.agent_kind != "telegraf":
        return None
    if token.revoked_at is not None:
        return None
    if token.expires_at is not None and token.expires_at <= datetime.now(UTC):
        return None
    return token


class ClassTokens:
    """Class tokens by sha256, cached for ``ttl`` (unknown ones briefly); a revocation's
    ``credential:`` notice drops one at once. Members are remembered by (token, host name) for
    ``ttl`` too (a forgotten member joins again at its next heartbeat after that)."""

    def __init__(self, pool: Pool, ttl: float) -> None:
        self._pool = pool
        self._ttl = ttl
        self._entries: dict[bytes, tuple[float, EnrollmentToken | None]] = {}
        self.members: dict[tuple[UUID, str], tuple[float, UUID]] = {}

    async def identify(self, header: str | None) -> EnrollmentToken | None:
        token = class_credential_of(header)
        if token is None:
            return None
        digest = hashlib.sha256(token.encode()).digest()
        entry = self._entries.get(digest)
        now = time.monotonic()
        if entry is not None and entry[0] > now:
            return _usable(entry[1])
        async with platform_transaction(self._pool, SCOPE) as conn:
            found = _usable(await fleet_enrollment.lookup(conn, digest))
        if len(self._entries) > 10_000:
            self._entries.clear()
        self._entries[digest] = (now + (self._ttl if found else _NEGATIVE_TTL), found)
        return found

    def revoke(self, digest_hex: str) -> None:
        digest = bytes.fromhex(digest_hex)
        if self._entries.pop(digest, None) is not None:
            self.members.clear()

    def clear(self) -> None:
        self._entries.clear()
        self.members.clear()


async def _agent_class(rt: FleetRuntime, req: AgentRequest) -> EnrollmentToken:
    token = await rt.classes.identify(req.header(b"authorization"))
    if token is None:
        raise errors.AuthRequired("unknown or revoked class token", headers=_CHALLENGE)
    return token


@dataclass(frozen=True)
class _Served:
    artifact: bytes
    since: datetime
    stale: bool  # the address's last GET got another artifact (or none is recorded)


async def class_default(
    conn: Conn, token: EnrollmentToken, version: str, agent_url: str
) -> fleet_class.ClassDefault | None:
    """The class config at the release pointer, rendered when the pointer moved; a failed
    render (or one holding secrets: the class has no per-agent secret delivery) keeps the
    previous one."""
    t = token.tenant_id
    current = await fleet_class.get_default(conn, t, token.id, version)
    rule = await load_rule(conn, t, "telegraf")
    if rule is None or (current is not None and current.desired_revision_id == rule.pointer):
        return current
    tree = await RENDERER.tree(conn, t, rule.pointer)
    labels = {**{k: str(v) for k, v in token.labels.items()}, "host.kind": token.host_kind}
    art = RENDERER.render(t, tree, "telegraf", version, labels, agent_url).artifact
    if art is None or art.secret_refs:
        return current
    await RENDERER.store(conn, t, {art.hash: ("telegraf", art)})
    checked = await check_artifacts(conn, t, {(art.hash, version): art})
    if failed(checked.get((art.hash, version), [])) is not None:
        return current
    return await fleet_class.write_default(conn, t, token.id, version, rule.pointer, art.hash)


async def _resolve(
    rt: FleetRuntime, token: EnrollmentToken, version: str, address: str | None, get: bool
) -> _Served:
    t = token.tenant_id
    async with tenant_transaction(rt.pool, SCOPE, t) as conn:
        await check_tenant(conn, t)
        default = await class_default(conn, token, version, rt.settings.agent_url)
        if default is None or default.desired_artifact is None or default.desired_since is None:
            raise fe.NoConfigYet(headers={"Retry-After": "10"})
        artifact, since = default.desired_artifact, default.desired_since
        if address is None:
            return _Served(artifact, since, stale=True)
        members = await fleet_class.members_at(conn, t, token.id, address, version)
        own = {m.desired_artifact: m.desired_since for m in members if m.desired_artifact}
        if len(own) > 1:
            await fleet_class.mark_ambiguous(conn, t, [m.id for m in members])
        elif own and artifact not in own:
            (artifact, member_since), *_ = own.items()
            since = member_since or since
        served = await fleet_class.served_to(conn, t, token.id, address)
        if get:
            await fleet_class.record_served(conn, t, token.id, address, artifact)
    return _Served(artifact, since, stale=served != artifact)


async def config(rt: FleetRuntime, req: AgentRequest) -> Reply:
    token = await _agent_class(rt, req)
    version, _raw = telegraf_version(req.header(b"user-agent"))
    if version is None or not supported_version("telegraf", version):
        raise fe.UnsupportedVersion("Telegraf 1.37 or later, named in User-Agent, is needed")
    head = req.method == "HEAD"
    address = rt.source_ip(req.peer, req.header(b"x-forwarded-for"))
    served = await _resolve(rt, token, version, address, get=not head)
    # §5: while the address has not fetched what it should run, HEAD shows a changing date
    when = datetime.now(UTC) if head and served.stale else served.since
    headers = [
        (b"last-modified", http_date(when).encode()),
        (b"cache-control", b"no-store"),
        (b"content-type", b"application/toml"),
    ]
    if head:
        return Reply(200, headers)
    body = await rt.artifacts.get(token.tenant_id, served.artifact)
    if body is None:
        raise fe.NoConfigYet(headers={"Retry-After": "10"})
    return Reply(200, headers, body)


async def _join(
    rt: FleetRuntime, token: EnrollmentToken, hostname: str, address: str | None
) -> UUID:
    async with tenant_transaction(rt.pool, SCOPE, token.tenant_id) as conn:
        await check_tenant(conn, token.tenant_id)
        member = await join_class(conn, token, hostname, address, rt.settings.agent_url)
    return member.id


async def _member(
    rt: FleetRuntime, token: EnrollmentToken, hostname: str, address: str | None
) -> UUID:
    key = (token.id, hostname)
    known = rt.classes.members.get(key)
    now = time.monotonic()
    if known is not None and known[0] > now:
        return known[1]
    try:
        member = await _join(rt, token, hostname, address)
    except psycopg.errors.UniqueViolation:
        # the same host joined at once on another request: this try finds its row
        member = await _join(rt, token, hostname, address)
    if len(rt.classes.members) > 100_000:
        rt.classes.members.clear()
    rt.classes.members[key] = (now + rt.settings.credential_ttl, member)
    return member


def _bad(field: str, reason: str) -> fe.BadReport:
    return fe.BadReport(reason, field=field, errors=[{"field": field, "msg": reason}])


async def heartbeat(rt: FleetRuntime, req: AgentRequest, max_body: int, depth: int) -> Reply:
    token = await _agent_class(rt, req)
    raw = await req.body(max_body)
    try:
        parsed: Any = boundedjson.loads(raw, max_depth=depth)
    except boundedjson.JsonRefused as exc:
        raise _bad("body", exc.reason) from None
    hostname = parsed.get("hostname") if isinstance(parsed, dict) else None
    if not isinstance(hostname, str) or not is_host_name(hostname):
        raise _bad("hostname", "class members are named by an RFC 1123 hostname")
    address = rt.source_ip(req.peer, req.header(b"x-forwarded-for"))
    agent_id = await _member(rt, token, hostname, address)
    external = parsed.get("id")
    try:
        hb = parse_heartbeat(
            agent_id,
            external if isinstance(external, str) else "",
            parsed,
            req.header(b"x-strataplane-config-hash"),
        )
    except BadHeartbeat as exc:
        raise _bad(exc.field or "body", str(exc)) from None
    rt.batcher.heartbeat(token.tenant_id, hb, address)
    return Reply(200, [])
