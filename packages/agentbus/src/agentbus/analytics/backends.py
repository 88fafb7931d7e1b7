"""Where analytics rows go: chDB inside this process (the default) or a ClickHouse server through
``clickhouse-connect``, behind one small Protocol. Both take the same SQL with ClickHouse's
``{name:Type}`` parameters and exchange rows as JSONEachRow.

chDB opens one data path per process and holds it exclusively; a second path in the same process
is refused, and so is the same path in another process. ``open_chdb`` therefore shares one
instance per process and counts its users, and a gateway that cannot open it runs without
analytics (``AnalyticsUnavailable``) rather than failing to start.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from platformkit import fastjson

__all__ = ["AnalyticsUnavailable", "Backend", "ChdbBackend", "ServerBackend", "open_backend"]

Row = dict[str, Any]


class AnalyticsUnavailable(RuntimeError):
    """The analytics store could not be opened or did not answer."""


class Backend(Protocol):
    name: str

    async def command(self, sql: str) -> None: ...

    async def insert(self, table: str, rows: Sequence[Mapping[str, Any]]) -> None: ...

    async def select(self, sql: str, params: Mapping[str, Any] | None = None) -> list[Row]: ...

    async def close(self) -> None: ...


def _line(row: Mapping[str, Any]) -> bytes:
    text = fastjson.dumps(row)  # orjson, or the standard encoder where orjson refuses
    return (text if isinstance(text, bytes) else text.encode()) + b"\n"


def _lines(rows: Sequence[Mapping[str, Any]]) -> bytes:
    return b"".join(map(_line, rows))


def _parse(raw: bytes | str) -> list[Row]:
    text = raw.decode() if isinstance(raw, bytes) else raw
    return [json.loads(line) for line in text.splitlines() if line]


def _text(value: Any, nested: bool = False) -> str:
    """A parameter in ClickHouse's text form, as chDB wants it (strings inside arrays quoted)."""
    if isinstance(value, list | tuple):
        return "[" + ",".join(_text(v, nested=True) for v in value) + "]"
    if isinstance(value, str) and nested:
        return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"
    return str(value)


_chdb_lock = threading.Lock()
_chdb_open: dict[str, Any] = {}  # path -> [connection, users]


class ChdbBackend:
    """chDB in this process; calls run one at a time on a worker thread."""

    name = "chdb"

    def __init__(self, path: Path) -> None:
        import chdb  # heavy: imported only when chDB is the store

        self.path = str(path.resolve())
        with _chdb_lock:
            held = _chdb_open.get(self.path)
            if held is None:
                other = next(iter(_chdb_open), None)
                if other is not None:
                    raise AnalyticsUnavailable(f"this process already holds chDB at {other}")
                path.mkdir(parents=True, exist_ok=True)
                try:
                    held = [chdb.connect(self.path), 0]
                except Exception as exc:  # chDB reports a held path as a generic error
                    raise AnalyticsUnavailable(f"chDB could not open {self.path}: {exc}") from exc
                _chdb_open[self.path] = held
            held[1] += 1
        self._conn = held[0]
        self._calls = asyncio.Lock()
        self._closed = False

    def _query(self, sql: str, fmt: str, params: Mapping[str, Any] | None) -> Any:
        texts = {k: _text(v) for k, v in params.items()} if params else None
        return self._conn.query(sql, fmt, params=texts)

    async def _run(
        self, sql: str, fmt: str = "CSV", params: Mapping[str, Any] | None = None
    ) -> Any:
        async with self._calls:
            return await asyncio.to_thread(self._query, sql, fmt, params)

    async def command(self, sql: str) -> None:
        await self._run(sql)

    def _insert(self, table: str, rows: Sequence[Mapping[str, Any]]) -> None:
        names = ", ".join(rows[0])
        body = _lines(rows).decode()
        self._conn.query(f"INSERT INTO {table} ({names}) FORMAT JSONEachRow\n{body}", "CSV")

    async def insert(self, table: str, rows: Sequence[Mapping[str, Any]]) -> None:
        if rows:  # encoded on the worker thread too: a batch is thousands of rows
            async with self._calls:
                await asyncio.to_thread(self._insert, table, rows)

    async def select(self, sql: str, params: Mapping[str, Any] | None = None) -> list[Row]:
        result = await self._run(sql, "JSONEachRow", params)
        return _parse(result.bytes())

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        with _chdb_lock:
            held = _chdb_open.get(self.path)
            if held is not None:
                held[1] -= 1
                if held[1] == 0:
                    del _chdb_open[self.path]
                    held[0].close()


class ServerBackend:
    """A ClickHouse server over HTTP(S); ``url`` as clickhouse-connect's ``dsn``."""

    name = "clickhouse"

    def __init__(self, url: str) -> None:
        import clickhouse_connect

        try:
            self._client = clickhouse_connect.get_client(dsn=url, autogenerate_session_id=False)
        except Exception as exc:
            raise AnalyticsUnavailable(f"ClickHouse server did not answer: {exc}") from exc
        self._calls = asyncio.Lock()  # one HTTP session, one query at a time

    async def _run(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        async with self._calls:
            return await asyncio.to_thread(fn, *args, **kwargs)

    async def command(self, sql: str) -> None:
        await self._run(self._client.command, sql)

    def _insert(self, table: str, rows: Sequence[Mapping[str, Any]]) -> None:
        self._client.raw_insert(table, list(rows[0]), _lines(rows), fmt="JSONEachRow")

    async def insert(self, table: str, rows: Sequence[Mapping[str, Any]]) -> None:
        if rows:  # encoded on the worker thread too: a batch is thousands of rows
            await self._run(self._insert, table, rows)

    async def select(self, sql: str, params: Mapping[str, Any] | None = None) -> list[Row]:
        raw = await self._run(
            self._client.raw_query, sql, parameters=dict(params or {}), fmt="JSONEachRow"
        )
        return _parse(raw)

    async def close(self) -> None:
        await asyncio.to_thread(self._client.close)


def open_backend(url: str | None, path: Path) -> Backend:
    """A ClickHouse server when ``url`` is set, else chDB at ``path``."""
    if url:
        return ServerBackend(url)
    return ChdbBackend(path)
