"""A minimal HTTP/1.1 keep-alive client on asyncio streams, so that one process can drive
thousands of simulated agents (a general-purpose client costs several times more per request).
Enough of HTTP for this server: Content-Length and chunked bodies, no redirects, no TLS."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from urllib.parse import urlsplit


@dataclass(frozen=True, slots=True)
class Reply:
    status: int
    headers: dict[str, str]
    body: bytes


class _Conn:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer

    async def request(
        self, method: str, target: str, host: str, headers: dict[str, str], body: bytes
    ) -> Reply:
        lines = [f"{method} {target} HTTP/1.1", f"Host: {host}"]
        lines += [f"{k}: {v}" for k, v in headers.items()]
        if body or method in ("POST", "PUT"):
            lines.append(f"Content-Length: {len(body)}")
        self.writer.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body)
        await self.writer.drain()
        status_line = await self.reader.readline()
        if not status_line:
            raise ConnectionError("connection closed")
        status = int(status_line.split()[1])
        got: dict[str, str] = {}
        while (line := await self.reader.readline()) not in (b"\r\n", b"\n", b""):
            name, _, value = line.decode("latin-1").partition(":")
            got[name.strip().lower()] = value.strip()
        data = b""
        if method != "HEAD" and status not in (204, 304):
            if got.get("transfer-encoding", "").lower() == "chunked":
                while size := int((await self.reader.readline()).split(b";")[0], 16):
                    data += await self.reader.readexactly(size + 2)
                    data = data[:-2]
                await self.reader.readline()
            else:
                data = await self.reader.readexactly(int(got.get("content-length", "0")))
        if got.get("connection", "").lower() == "close":
            self.writer.close()
        return Reply(status, got, data)


class HttpPool:
    """Up to ``size`` keep-alive connections to one origin, shared by many callers."""

    def __init__(self, base_url: str, size: int = 100) -> None:
        parts = urlsplit(base_url)
        self.host = parts.hostname or "127.0.0.1"
        self.port = parts.port or 80
        self._authority = parts.netloc
        self._idle: asyncio.LifoQueue[_Conn] = asyncio.LifoQueue()
        self._slots = asyncio.Semaphore(size)

    async def request(
        self, method: str, target: str, headers: dict[str, str], body: bytes = b""
    ) -> Reply:
        async with self._slots:
            conn = self._idle.get_nowait() if not self._idle.empty() else None
            for attempt in range(2):
                if conn is None or conn.writer.is_closing():
                    conn = _Conn(*await asyncio.open_connection(self.host, self.port))
                try:
                    reply = await conn.request(method, target, self._authority, headers, body)
                except (ConnectionError, asyncio.IncompleteReadError, ValueError):
                    conn.writer.close()
                    conn = None
                    if attempt:
                        raise
                    continue
                if not conn.writer.is_closing():
                    self._idle.put_nowait(conn)
                return reply
            raise ConnectionError("unreachable")

    async def close(self) -> None:
        while not self._idle.empty():
            self._idle.get_nowait().writer.close()
