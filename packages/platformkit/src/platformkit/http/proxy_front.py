"""A listener that accepts PROXY-protocol connections from trusted load balancers and relays
them to the application server, with the address the header names as the last
``X-Forwarded-For`` hop of every request, and ``X-Forwarded-Proto`` saying whether the client
reached the load balancer over TLS (``https`` only when a v2 header carries PP2_TYPE_SSL; a
client's own ``X-Forwarded-Proto`` is dropped), which makes session cookies ``Secure``.

granian cannot read a PROXY header itself, so this front does: it refuses connections from
peers outside ``trusted`` and connections that do not start with a valid header (within
``header_timeout``), then re-frames each HTTP/1.1 request with h11 so it can append the
forwarded hop, and copies responses back byte for byte. The application trusts
``X-Forwarded-For`` from the front's own address, as from any configured proxy.

Run it with ``python -m platformkit.http.proxy_front --listen HOST:PORT --upstream HOST:PORT
--trusted CIDR ...``; :func:`start_front` starts that child beside a granian server.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ipaddress
import logging
import signal
import ssl
import subprocess
import sys
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

import h11

from platformkit.http.proxy_protocol import ProxyHeader, ProxyHeaderError, parse

__all__ = [
    "Front",
    "FrontConfig",
    "copy_stream",
    "forward_requests",
    "relay_upstream",
    "run_front",
    "serve_connections",
    "serve_front",
    "start_front",
    "upstream_host",
]

log = logging.getLogger("platformkit.http.proxy_front")

_READ = 65536
type Network = ipaddress.IPv4Network | ipaddress.IPv6Network


@dataclass(frozen=True)
class FrontConfig:
    listen: tuple[str, int]
    upstream: tuple[str, int]
    trusted: tuple[Network, ...]
    header_timeout: float = 5.0

    def trusts(self, peer: str) -> bool:
        try:
            address = ipaddress.ip_address(peer)
        except ValueError:
            return False
        return any(address in network for network in self.trusted)


async def serve_front(config: FrontConfig) -> Front:
    """Listen on ``config.listen``; each connection is relayed until either side ends it."""
    return await serve_connections(
        config.listen, lambda reader, writer: _relay(config, reader, writer)
    )


async def serve_connections(
    listen: tuple[str, int],
    relay: Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]],
    tls: ssl.SSLContext | None = None,
) -> Front:
    """Listen on ``listen`` (over TLS with a ``tls`` context); each connection runs ``relay``,
    is one of the front's open connections meanwhile, and is closed after; a peer that hangs up
    or speaks no HTTP ends only its own connection."""
    front = Front()

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        front.connections.add(task)
        try:
            await relay(reader, writer)
        except (ConnectionError, TimeoutError, asyncio.IncompleteReadError, h11.ProtocolError):
            pass
        finally:
            front.connections.discard(task)
            writer.close()
            with contextlib.suppress(OSError):  # ssl.SSLError and ConnectionError are OSErrors
                await writer.wait_closed()

    host, port = listen
    front.server = await asyncio.start_server(handle, host, port, ssl=tls)
    return front


@dataclass
class Front:
    """The listening server and its open connections (ended, not drained, at close)."""

    server: asyncio.Server | None = None
    connections: set[asyncio.Task[None]] = field(default_factory=set)

    async def close(self) -> None:
        if self.server is not None:
            self.server.close()
        for task in list(self.connections):
            task.cancel()
        await asyncio.gather(*self.connections, return_exceptions=True)

    async def __aenter__(self) -> Front:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


async def _relay(
    config: FrontConfig, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
) -> None:
    peer = writer.get_extra_info("peername")
    if not peer or not config.trusts(peer[0]):
        log.warning("refused a connection from %s: not a trusted proxy", peer and peer[0])
        return
    try:
        header, rest = await asyncio.wait_for(_read_header(reader), config.header_timeout)
    except ProxyHeaderError as error:
        log.warning("refused a connection from %s: %s", peer[0], error)
        return
    hop = header.source[0].encode("ascii") if header.source else None
    await relay_upstream(
        config.upstream, reader, writer, rest, lambda r: _with_hop(r, hop, header.tls)
    )


async def relay_upstream(
    upstream: tuple[str, int],
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    buffered: bytes,
    rewrite: Callable[[h11.Request], h11.Request],
) -> None:
    """Relay a client's connection to ``upstream``: its requests (``buffered``, read already,
    first) each through ``rewrite``, the answers back as they come, until either side ends."""
    up_reader, up_writer = await asyncio.open_connection(*upstream)
    responses = asyncio.create_task(copy_stream(up_reader, writer))
    requests = asyncio.create_task(forward_requests(reader, buffered, up_writer, rewrite))
    try:
        # Either side ending ends the relay: a client that closed will read no more answers.
        await asyncio.wait({responses, requests}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in (requests, responses):
            task.cancel()
        await asyncio.gather(requests, responses, return_exceptions=True)
        up_writer.close()


async def _read_header(reader: asyncio.StreamReader) -> tuple[ProxyHeader, bytes]:
    buffer = b""
    while True:
        header = parse(buffer)
        if header is not None:
            return header, buffer[header.length :]
        chunk = await reader.read(_READ)
        if not chunk:
            raise ProxyHeaderError("the connection ended inside the PROXY header")
        buffer += chunk


async def copy_stream(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    while chunk := await reader.read(_READ):
        writer.write(chunk)
        await writer.drain()


async def forward_requests(
    reader: asyncio.StreamReader,
    buffered: bytes,
    upstream: asyncio.StreamWriter,
    rewrite: Callable[[h11.Request], h11.Request],
) -> None:
    """Each request of the connection, in order, through ``rewrite``; ends at EOF."""
    closed = False
    while buffered or not closed:
        incoming = h11.Connection(h11.SERVER)  # one per request: we never answer through it
        outgoing = h11.Connection(h11.CLIENT)
        if buffered:
            incoming.receive_data(buffered)
        if closed:
            incoming.receive_data(b"")  # h11 reads empty data as the end of the stream
        while True:
            event = incoming.next_event()
            if event is h11.NEED_DATA:
                chunk = await reader.read(_READ)
                incoming.receive_data(chunk)
                continue
            if isinstance(event, h11.ConnectionClosed) or event is h11.PAUSED:
                return
            if isinstance(event, h11.Request):
                event = rewrite(event)
            upstream.write(outgoing.send(event) or b"")  # type: ignore[arg-type]
            await upstream.drain()
            if isinstance(event, h11.EndOfMessage):
                break
        buffered, closed = incoming.trailing_data


def _with_hop(request: h11.Request, hop: bytes | None, tls: bool) -> h11.Request:
    """The request with the forwarded hop appended and ``X-Forwarded-Proto`` set by us alone:
    https when the load balancer's header says the client came over TLS, else http."""
    ours = (b"x-forwarded-for", b"x-forwarded-proto")
    headers = [(name, value) for name, value in request.headers if name not in ours]
    if hop is not None:
        chain = b", ".join(value for name, value in request.headers if name == ours[0])
        headers.append((ours[0], chain + b", " + hop if chain else hop))
    headers.append((ours[1], b"https" if tls else b"http"))
    return h11.Request(
        method=request.method, target=request.target, headers=headers, http_version="1.1"
    )


def start_front(
    listen: tuple[str, int], upstream: tuple[str, int], trusted: Sequence[str]
) -> subprocess.Popen[bytes]:
    """Start the front as a child process (it ends with its parent, like the granian child)."""
    from platformkit.http.serve import child_preexec

    command = [sys.executable, "-m", "platformkit.http.proxy_front"]
    command += [
        "--listen",
        f"{listen[0]}:{listen[1]}",
        "--upstream",
        f"{upstream[0]}:{upstream[1]}",
    ]
    for network in trusted:
        command += ["--trusted", network]
    return subprocess.Popen(command, start_new_session=True, preexec_fn=child_preexec())  # noqa: S603


def upstream_host(host: str) -> str:
    """The address the front reaches a server listening on ``host`` at (and connects from)."""
    return "127.0.0.1" if host in ("", "0.0.0.0", "::") else host  # noqa: S104


def endpoint(text: str) -> tuple[str, int]:
    """``HOST:PORT`` (or ``[v6]:PORT``) of a command line."""
    host, _, port = text.rpartition(":")
    return host.strip("[]") or "127.0.0.1", int(port)


def run_until_signalled(start: Callable[[], Awaitable[Front]]) -> None:
    """Run the front ``start`` opens until SIGINT or SIGTERM, then close it."""

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        async with await start():
            await stop.wait()

    asyncio.run(main())


def run_front(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m platformkit.http.proxy_front")
    parser.add_argument("--listen", required=True, type=endpoint, help="HOST:PORT to accept on")
    parser.add_argument("--upstream", required=True, type=endpoint, help="HOST:PORT of the app")
    parser.add_argument("--trusted", action="append", required=True, help="CIDR of a proxy")
    parser.add_argument("--header-timeout", type=float, default=5.0)
    args = parser.parse_args(argv)
    config = FrontConfig(
        listen=args.listen,
        upstream=args.upstream,
        trusted=tuple(ipaddress.ip_network(t, strict=False) for t in args.trusted),
        header_timeout=args.header_timeout,
    )
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    run_until_signalled(lambda: serve_front(config))


if __name__ == "__main__":
    run_front()
