"""Audit sinks: where a tenant's audit chain is streamed (controllers/audit_sinks.py).

``config`` names the target and never holds a credential; a webhook's ``Authorization`` value
is sealed (``sealed_value`` owner ``audit_sink/<id>``) and never shown back. A new sink starts
after the tenant's latest event unless ``start`` names the first seq to export.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit
from uuid import UUID

from platformkit.ids import uuid7

from strataplane.actions import secret_box
from strataplane.actions import secret_errors as se
from strataplane.actions.access import tenant_tx
from strataplane.actions.context import Ctx
from strataplane.actions.secrets import keyring
from strataplane.store import audit_sinks, sealed
from strataplane.store.audit_sinks import AuditSink

MAX_URL = 2048
MAX_CREDENTIAL = 4096


@dataclass(frozen=True)
class SinkState:
    sink: AuditSink
    backlog: int


def owner_of(sink_id: UUID) -> str:
    return f"audit_sink/{sink_id}"


def _webhook(config: dict[str, Any]) -> dict[str, Any]:
    url = config.get("url")
    if set(config) != {"url"} or not isinstance(url, str) or len(url) > MAX_URL:
        msg = 'a webhook\'s config is {"url": "https://..."}'
        raise se.InvalidAuditSink(msg, field="config")
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise se.InvalidAuditSink("an http(s) URL with a host", field="config.url")
    return {"url": url}


def _syslog(config: dict[str, Any]) -> dict[str, Any]:
    address, transport = config.get("address"), config.get("transport", "udp")
    if not set(config) <= {"address", "transport", "tls"} or not isinstance(address, str):
        raise se.InvalidAuditSink(
            'a syslog config is {"address": "host:port", "transport": "udp"|"tcp"}',
            field="config",
        )
    if config.get("tls", False) is not False:
        raise se.InvalidAuditSink("syslog over TLS is not supported yet", field="config.tls")
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536 or len(address) > 300:
        raise se.InvalidAuditSink("host:port", field="config.address")
    try:
        ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        if not all(c.isalnum() or c in ".-" for c in host):
            raise se.InvalidAuditSink("host:port", field="config.address") from None
    if transport not in ("udp", "tcp"):
        raise se.InvalidAuditSink("udp or tcp", field="config.transport")
    return {"address": address, "transport": transport, "tls": False}


def _config(kind: str, config: dict[str, Any]) -> dict[str, Any]:
    if kind == "webhook":
        return _webhook(config)
    if kind == "syslog":
        return _syslog(config)
    raise se.InvalidAuditSink("webhook or syslog", field="kind")


def _check_credential(kind: str, credential: str | None) -> None:
    if credential is None:
        return
    if kind != "webhook":
        raise se.InvalidAuditSink("only a webhook has a credential", field="credential")
    if not credential or len(credential) > MAX_CREDENTIAL or not credential.isprintable():
        raise se.InvalidAuditSink("a printable header value", field="credential")


async def create_sink(
    ctx: Ctx,
    kind: str,
    config: dict[str, Any],
    *,
    credential: str | None = None,
    start: int | None = None,
) -> AuditSink:
    config = _config(kind, config)
    _check_credential(kind, credential)
    ring = await keyring(ctx.services) if credential is not None else None
    async with tenant_tx(ctx) as tx:
        tx.require("tenant.admin")
        sink_id = uuid7()
        credential_id = None
        if credential is not None and ring is not None:
            credential_id = uuid7()
            await secret_box.seal_value(
                ring, tx.conn, tx.tenant_id, credential_id, owner_of(sink_id), credential.encode()
            )
        latest = await audit_sinks.latest_seq(tx.conn, tx.tenant_id)
        cursor = latest if start is None else max(0, min(start - 1, latest))
        sink = await audit_sinks.insert_sink(
            tx.conn, tx.tenant_id, sink_id, kind, config, credential_id, cursor
        )
        details = {"kind": kind, "config": config, "cursor_seq": cursor}
        await tx.audit("audit_sink.create", "audit_sink", sink_id, details)
    return sink


async def list_sinks(ctx: Ctx) -> list[SinkState]:
    async with tenant_tx(ctx) as tx:
        tx.require("audit.read")
        latest = await audit_sinks.latest_seq(tx.conn, tx.tenant_id)
        found = await audit_sinks.list_sinks(tx.conn, tx.tenant_id)
    return [SinkState(s, latest - s.cursor_seq) for s in found]


async def access_sink(ctx: Ctx, sink_id: UUID) -> SinkState:
    async with tenant_tx(ctx) as tx:
        tx.require("audit.read")
        sink = await audit_sinks.get_sink(tx.conn, tx.tenant_id, sink_id)
        latest = await audit_sinks.latest_seq(tx.conn, tx.tenant_id)
    if sink is None:
        raise se.AuditSinkNotFound()
    return SinkState(sink, latest - sink.cursor_seq)


async def delete_sink(ctx: Ctx, sink_id: UUID) -> None:
    async with tenant_tx(ctx) as tx:
        tx.require("tenant.admin")
        if await audit_sinks.get_sink(tx.conn, tx.tenant_id, sink_id) is None:
            raise se.AuditSinkNotFound()
        credential_id = await audit_sinks.delete_sink(tx.conn, tx.tenant_id, sink_id)
        if credential_id is not None:
            await sealed.delete_sealed(tx.conn, tx.tenant_id, [credential_id])
        await tx.audit("audit_sink.delete", "audit_sink", sink_id, {})


async def update_sink(
    ctx: Ctx,
    sink_id: UUID,
    *,
    config: dict[str, Any] | None = None,
    credential: str | None = None,
    clear_credential: bool = False,
) -> AuditSink:
    """Change the target or the credential; the cursor stays, so nothing is skipped or resent."""
    async with tenant_tx(ctx) as tx:
        tx.require("tenant.admin")
        sink = await audit_sinks.get_sink(tx.conn, tx.tenant_id, sink_id)
        if sink is None:
            raise se.AuditSinkNotFound()
        new_config = _config(sink.kind, config) if config is not None else sink.config
        _check_credential(sink.kind, credential)
        credential_id = None if clear_credential or credential is not None else sink.credential_id
        await audit_sinks.update_sink(
            tx.conn, tx.tenant_id, sink_id, config=new_config, credential_id=credential_id
        )
        if sink.credential_id is not None and credential_id is None:
            await sealed.delete_sealed(tx.conn, tx.tenant_id, [sink.credential_id])
        if credential is not None:
            ring = await keyring(ctx.services)
            credential_id = uuid7()
            await secret_box.seal_value(
                ring, tx.conn, tx.tenant_id, credential_id, owner_of(sink_id), credential.encode()
            )
            await audit_sinks.update_sink(
                tx.conn, tx.tenant_id, sink_id, config=new_config, credential_id=credential_id
            )
        details = {"config": new_config, "credential_changed": credential is not None}
        await tx.audit("audit_sink.update", "audit_sink", sink_id, details)
        updated = await audit_sinks.get_sink(tx.conn, tx.tenant_id, sink_id)
    assert updated is not None
    return updated
