"""The benchmark's HTTP client: keep-alive HTTP/1.1 connections on asyncio streams, nothing
else. The client shares the machine with the gateway, PostgreSQL and NATS, so it is kept to
what the benchmark needs: one request at a time per connection, a body with
``Content-Length`` in both directions, a pool of connections that requests wait for.
"""

from __future__ import annotations

import asyncio
import json
from contextlib import suppress
from typing import Any
from urllib.parse import urlsplit


class HttpError(RuntimeError):
    """The server answered something this client does not read (or closed the connection)."""


class Connection:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer

    async def request(self, head: bytes, body: bytes) -> tuple[int, bytes]:
        self.writer.write(head + body)
        status_line = await self.reader.readline()
        parts = status_line.split(b" ", 2)
        if len(parts) < 2 or not parts[0].startswith(b"HTTP/1."):
            raise HttpError(f"unexpected answer {status_line[:80]!r}")
        headers = await self.reader.readuntil(b"\r\n\r\n")
        length = None
        for line in headers.split(b"\r\n"):
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value)
            elif name.strip().lower() == b"transfer-encoding":
                raise HttpError("chunked answers are not read by this client")
        content = await self.reader.readexactly(length) if length else b""
        return int(parts[1]), content

    def close(self) -> None:
        self.writer.close()


class Client:
    """``size`` keep-alive connections to ``base_url`` (``http://host:port``), opened lazily;
    a request waits for a free one."""

    def __init__(self, base_url: str, size: int, headers: dict[str, str]) -> None:
        url = urlsplit(base_url)
        self.host, self.port = url.hostname or "127.0.0.1", url.port or 80
        fixed = {"Host": f"{self.host}:{self.port}", **headers}
        self._fixed = "".join(f"{k}: {v}\r\n" for k, v in fixed.items()).encode()
        self._free: asyncio.Queue[Connection | None] = asyncio.Queue()
        for _ in range(size):
            self._free.put_nowait(None)  # a slot; connected on first use
        self._open: list[Connection] = []

    async def request(
        self, method: str, target: str, body: bytes = b"", content_type: str | None = None
    ) -> tuple[int, bytes]:
        head = f"{method} {target} HTTP/1.1\r\n".encode() + self._fixed
        if content_type is not None:
            head += f"Content-Type: {content_type}\r\n".encode()
        head += f"Content-Length: {len(body)}\r\n\r\n".encode()
        conn = await self._free.get()
        try:
            if conn is None:
                conn = Connection(*await asyncio.open_connection(self.host, self.port))
                self._open.append(conn)
            answer = await conn.request(head, body)
        except BaseException:
            if conn is not None:
                conn.close()
                self._open.remove(conn)
            self._free.put_nowait(None)
            raise
        self._free.put_nowait(conn)
        return answer

    async def json(
        self, method: str, target: str, payload: Any = None
    ) -> tuple[int, dict[str, Any]]:
        body = b"" if payload is None else json.dumps(payload).encode()
        status, content = await self.request(
            method, target, body, None if payload is None else "application/json"
        )
        return status, (json.loads(content) if content else {})

    async def aclose(self) -> None:
        for conn in self._open:
            conn.close()
            with suppress(Exception):
                await conn.writer.wait_closed()
        self._open.clear()
