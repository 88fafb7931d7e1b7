"""The audit exporter: streams each tenant's audit chain to its sinks (schema: audit_sink), at
least once and in order.

Per sink and pass: take the sink's advisory lock for the transaction (one exporter per sink
across replicas), read up to ``batch`` events after ``cursor_seq``, send them in seq order, and
only then move the cursor, in the same transaction. A failure (or a crash, or a restart) leaves
the cursor where it was: the next pass sends the same events again, so a receiver may see an
event twice (its ``seq`` tells) but never misses one. ``last_error`` and ``last_attempt_at``
show the state; the backlog is the tenant's latest seq minus the cursor.

Webhook: ``POST`` of ``{"sink": id, "events": [...]}`` (each event as the chain hashes it, with
``hash`` and ``prev_hash`` in hex), ``Authorization`` from the sealed credential, any 2xx is a
success, redirects are not followed. Syslog: one RFC 5424 message per event (domain/syslog.py)
over UDP, or TCP with octet counting.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import socket
import urllib.error
import urllib.request
from collections.abc import Awaitable, Callable
from typing import Any
from uuid import UUID

from platformkit.crypto import DecryptionError, Keyring
from platformkit.db.scope import Conn, Pool, platform_transaction, tenant_transaction

from strataplane.actions import secret_box
from strataplane.db import SCOPE
from strataplane.domain.syslog import frame_tcp, message
from strataplane.store import audit, audit_sinks, sealed
from strataplane.store.audit_sinks import AuditSink

log = logging.getLogger(__name__)


class SinkFailed(Exception):
    """The target refused or could not be reached; the text names no credential."""


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None  # a redirect is an answer like any other non-2xx: the credential stays


_OPENER = urllib.request.build_opener(_NoRedirect)


def _post(url: str, body: bytes, authorization: str | None, timeout: float) -> None:
    headers = {"Content-Type": "application/json", "User-Agent": "strataplane-audit-export"}
    if authorization:
        headers["Authorization"] = authorization
    request = urllib.request.Request(url, data=body, method="POST", headers=headers)  # noqa: S310 - http(s) checked when the sink was made
    try:
        with _OPENER.open(request, timeout=timeout) as response:
            status = response.status
    except urllib.error.HTTPError as exc:
        status = exc.code
    except (urllib.error.URLError, OSError) as exc:
        reason = exc.reason if isinstance(exc, urllib.error.URLError) else exc
        raise SinkFailed(f"webhook unreachable: {type(reason).__name__}") from None
    if not 200 <= status < 300:
        raise SinkFailed(f"webhook answered HTTP {status}")


def _address(config: dict[str, Any]) -> tuple[str, int]:
    host, _, port = str(config["address"]).rpartition(":")
    return host.strip("[]"), int(port)


async def _syslog(config: dict[str, Any], messages: list[bytes], limit: float) -> None:
    host, port = _address(config)
    try:
        if config.get("transport", "udp") == "tcp":
            async with asyncio.timeout(limit):
                _reader, writer = await asyncio.open_connection(host, port)
                try:
                    writer.write(b"".join(frame_tcp(m) for m in messages))
                    await writer.drain()
                finally:
                    writer.close()
                    with contextlib.suppress(OSError):
                        await writer.wait_closed()
        else:
            loop = asyncio.get_running_loop()
            transport, _ = await loop.create_datagram_endpoint(
                asyncio.DatagramProtocol, remote_addr=(host, port)
            )
            try:
                for m in messages:
                    transport.sendto(m)
            finally:
                transport.close()
    except (OSError, TimeoutError) as exc:
        raise SinkFailed(f"syslog unreachable: {type(exc).__name__}") from None


def export_events(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for row in rows:
        event = audit.event_of(row)
        event["hash"] = bytes(row["hash"]).hex()
        event["prev_hash"] = bytes(row["prev_hash"]).hex() if row["prev_hash"] else None
        out.append(event)
    return out


class AuditExporter:
    def __init__(
        self,
        pool: Pool,
        keyring: Callable[[], Awaitable[Keyring]],
        *,
        interval: float = 2.0,
        batch: int = 100,
        timeout: float = 10.0,
    ) -> None:
        self.pool, self.keyring = pool, keyring
        self.interval, self.batch, self.timeout = interval, batch, timeout
        self.hostname = socket.gethostname()
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        self._task = asyncio.create_task(self._loop(), name="audit-exporter")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _loop(self) -> None:
        while True:
            try:
                await self.run_once()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("audit exporter pass failed")
            await asyncio.sleep(self.interval)

    async def run_once(self) -> int:
        """One pass over every sink (each until it is caught up or fails); events sent."""
        async with platform_transaction(self.pool, SCOPE) as conn:
            sinks = await audit_sinks.all_sinks(conn)
        sent = 0
        for tenant_id, sink_id in sinks:
            while (done := await self.export_sink(tenant_id, sink_id)) > 0:
                sent += done
        return sent

    async def export_sink(self, tenant_id: UUID, sink_id: UUID) -> int:
        """Send the next batch of one sink; how many events went out (0: none or failed)."""
        async with tenant_transaction(self.pool, SCOPE, tenant_id) as conn:
            if not await audit_sinks.lock_sink(conn, sink_id):
                return 0
            sink = await audit_sinks.get_sink(conn, tenant_id, sink_id)
            if sink is None:
                return 0
            rows = await audit_sinks.events_after(conn, tenant_id, sink.cursor_seq, self.batch)
            if not rows:
                return 0
            events = export_events(rows)
            try:
                await self._send(conn, sink, events)
            except SinkFailed as exc:
                await audit_sinks.failed(conn, tenant_id, sink_id, str(exc))
                return 0
            await audit_sinks.advance(conn, tenant_id, sink_id, events[-1]["seq"])
            return len(events)

    async def _send(self, conn: Conn, sink: AuditSink, events: list[dict[str, Any]]) -> None:
        if sink.kind == "webhook":
            authorization = await self._credential(conn, sink)
            body = json.dumps({"sink": str(sink.id), "events": events}).encode()
            url = str(sink.config["url"])
            await asyncio.to_thread(_post, url, body, authorization, self.timeout)
        else:
            messages = [message(e, self.hostname) for e in events]
            await _syslog(sink.config, messages, self.timeout)

    async def _credential(self, conn: Conn, sink: AuditSink) -> str | None:
        if sink.credential_id is None:
            return None
        row = await sealed.get_sealed(conn, sink.tenant_id, sink.credential_id)
        if row is None:
            return None
        ring = await self.keyring()  # the file's current keys: a rotation may have added one
        try:
            plain = await secret_box.open_value(ring, conn, sink.tenant_id, row)
            return plain.decode(errors="replace")
        except DecryptionError:
            raise SinkFailed("the webhook credential cannot be decrypted") from None
