"""A minimal HTTP/1.1 keep-alive client on asyncio protocols, so that one process can drive
thousands of simulated agents while spending little of the machine the server runs on (a
general-purpose client, or even asyncio streams, cost several times more per request).
Enough of HTTP for this server: Content-Length and chunked bodies, no redirects; TLS (with a
client certificate) when given an ``ssl.SSLContext``."""

from __future__ import annotations

import asyncio
import ssl
from dataclasses import dataclass
from typing import cast
from urllib.parse import urlsplit


@dataclass(frozen=True, slots=True)
class Reply:
    status: int
    headers: dict[str, str]
    body: bytes


def _chunked(buf: bytearray, start: int) -> tuple[bytes, int] | None:
    """The body of a complete chunked message from ``start`` and the offset after it, or None
    while more data is needed."""
    parts: list[bytes] = []
    at = start
    while True:
        eol = buf.find(b"\r\n", at)
        if eol < 0:
            return None
        size = int(bytes(buf[at:eol]).split(b";")[0], 16)
        if size == 0:
            end = buf.find(b"\r\n\r\n", eol)  # no trailers are sent: the last CRLF follows
            return (b"".join(parts), end + 4) if end >= 0 else None
        if len(buf) < eol + 2 + size + 2:
            return None
        parts.append(bytes(buf[eol + 2 : eol + 2 + size]))
        at = eol + 2 + size + 2


class _Conn(asyncio.Protocol):
    """One connection, one request at a time."""

    def __init__(self) -> None:
        self._buf = bytearray()
        self._waiter: asyncio.Future[Reply] | None = None
        self._bodiless = False
        self.transport: asyncio.Transport | None = None
        self.closed = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # a stream transport, though uvloop's do not subclass asyncio.Transport
        self.transport = cast(asyncio.Transport, transport)

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_exception(ConnectionError("connection closed"))

    def data_received(self, data: bytes) -> None:
        self._buf += data
        waiter = self._waiter
        if waiter is None or waiter.done():
            return
        end = self._buf.find(b"\r\n\r\n")
        if end < 0:
            return
        lines = bytes(self._buf[:end]).decode("latin-1").split("\r\n")
        try:
            status = int(lines[0].split(" ", 2)[1])
        except (IndexError, ValueError):
            waiter.set_exception(ConnectionError(f"bad status line {lines[0]!r}"))
            return
        headers: dict[str, str] = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        start = end + 4
        if self._bodiless or status in (204, 304):
            body, after = b"", start
        elif headers.get("transfer-encoding", "").lower() == "chunked":
            found = _chunked(self._buf, start)
            if found is None:
                return
            body, after = found
        else:
            after = start + int(headers.get("content-length", "0"))
            if len(self._buf) < after:
                return
            body = bytes(self._buf[start:after])
        del self._buf[:after]
        waiter.set_result(Reply(status, headers, body))

    async def request(self, method: str, head: bytes, body: bytes) -> Reply:
        assert self.transport is not None
        self._waiter = asyncio.get_running_loop().create_future()
        self._bodiless = method == "HEAD"
        self.transport.write(head + body if body else head)
        reply = await self._waiter
        if reply.headers.get("connection", "").lower() == "close":
            self.transport.close()
            self.closed = True
        return reply


class HttpPool:
    """Up to ``size`` keep-alive connections to one origin, shared by many callers."""

    def __init__(self, base_url: str, size: int = 100, tls: ssl.SSLContext | None = None) -> None:
        parts = urlsplit(base_url)
        self.host = parts.hostname or "127.0.0.1"
        self.port = parts.port or (443 if parts.scheme == "https" else 80)
        self._tls = tls
        self._authority = parts.netloc
        self._idle: list[_Conn] = []
        self._slots = asyncio.Semaphore(size)

    def _head(self, method: str, target: str, headers: dict[str, str], body: bytes) -> bytes:
        lines = [f"{method} {target} HTTP/1.1", f"Host: {self._authority}"]
        lines += [f"{k}: {v}" for k, v in headers.items()]
        if body or method in ("POST", "PUT"):
            lines.append(f"Content-Length: {len(body)}")
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")

    async def request(
        self, method: str, target: str, headers: dict[str, str], body: bytes = b""
    ) -> Reply:
        head = self._head(method, target, headers, body)
        async with self._slots:
            conn = self._idle.pop() if self._idle else None
            for attempt in range(2):
                if conn is None or conn.closed:
                    loop = asyncio.get_running_loop()
                    _transport, conn = await loop.create_connection(
                        _Conn,
                        self.host,
                        self.port,
                        ssl=self._tls,
                        server_hostname=self.host if self._tls is not None else None,
                    )
                try:
                    reply = await conn.request(method, head, body)
                except ConnectionError:
                    if conn.transport is not None:
                        conn.transport.close()
                    conn = None
                    if attempt:
                        raise
                    continue
                if not conn.closed:
                    self._idle.append(conn)
                return reply
            raise ConnectionError("unreachable")

    async def close(self) -> None:
        while self._idle:
            conn = self._idle.pop()
            if conn.transport is not None:
                conn.transport.close()
