"""A TLS listener for agents in front of the application server: it terminates TLS with the
configured certificate and key, asks for a client certificate when a client CA is configured
(optional: an agent without one still connects), and relays each HTTP/1.1 request to the
server with the verified client certificate in ``X-Client-Cert`` (base64 of its DER), the
client's address as the last ``X-Forwarded-For`` hop and ``X-Forwarded-Proto: https``. A
client's own ``X-Client-Cert`` is dropped, so the header only ever holds what TLS verified.

The application must trust these headers only from the front's address (it is a proxy of its
own), and the server it relays to should listen on loopback.

Run it with ``python -m platformkit.http.tls_front --listen HOST:PORT --upstream HOST:PORT
--cert FILE --key FILE [--client-ca FILE]``; :func:`start_tls_front` starts that child.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import logging
import ssl
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass

import h11

from platformkit.http.proxy_front import (
    Front,
    endpoint,
    relay_upstream,
    run_until_signalled,
    serve_connections,
)

__all__ = ["CLIENT_CERT_HEADER", "TlsFrontConfig", "serve_tls_front", "start_tls_front"]

log = logging.getLogger("platformkit.http.tls_front")
CLIENT_CERT_HEADER = b"x-client-cert"
_FORWARDED = (b"x-forwarded-for", b"x-forwarded-proto", CLIENT_CERT_HEADER)


@dataclass(frozen=True)
class TlsFrontConfig:
    listen: tuple[str, int]
    upstream: tuple[str, int]
    certfile: str
    keyfile: str
    client_ca: str | None = None

    def context(self) -> ssl.SSLContext:
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        context.load_cert_chain(self.certfile, self.keyfile)
        if self.client_ca:
            context.load_verify_locations(self.client_ca)
            context.verify_mode = ssl.CERT_OPTIONAL
        return context


def _rewrite(request: h11.Request, peer: bytes, cert: bytes | None) -> h11.Request:
    headers = [(n, v) for n, v in request.headers if n not in _FORWARDED]
    chain = b", ".join(v for n, v in request.headers if n == b"x-forwarded-for")
    headers.append((b"x-forwarded-for", chain + b", " + peer if chain else peer))
    headers.append((b"x-forwarded-proto", b"https"))
    if cert is not None:
        headers.append((CLIENT_CERT_HEADER, base64.b64encode(cert)))
    return h11.Request(
        method=request.method, target=request.target, headers=headers, http_version="1.1"
    )


async def serve_tls_front(config: TlsFrontConfig) -> Front:
    return await serve_connections(
        config.listen, lambda reader, writer: _relay(config, reader, writer), config.context()
    )


async def _relay(
    config: TlsFrontConfig, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
) -> None:
    peer = writer.get_extra_info("peername")
    tls: ssl.SSLObject | None = writer.get_extra_info("ssl_object")
    cert = tls.getpeercert(binary_form=True) if tls is not None else None
    address = str(peer[0]).encode("ascii") if peer else b"unknown"
    await relay_upstream(config.upstream, reader, writer, b"", lambda r: _rewrite(r, address, cert))


def start_tls_front(config: TlsFrontConfig) -> subprocess.Popen[bytes]:
    """Start the front as a child process (it ends with its parent, like the granian child)."""
    from platformkit.http.serve import child_preexec

    command = [sys.executable, "-m", "platformkit.http.tls_front"]
    command += ["--listen", f"{config.listen[0]}:{config.listen[1]}"]
    command += ["--upstream", f"{config.upstream[0]}:{config.upstream[1]}"]
    command += ["--cert", config.certfile, "--key", config.keyfile]
    if config.client_ca:
        command += ["--client-ca", config.client_ca]
    return subprocess.Popen(command, start_new_session=True, preexec_fn=child_preexec())  # noqa: S603


def run_tls_front(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m platformkit.http.tls_front")
    parser.add_argument("--listen", required=True, type=endpoint, help="HOST:PORT to accept on")
    parser.add_argument("--upstream", required=True, type=endpoint, help="HOST:PORT of the app")
    parser.add_argument("--cert", required=True, help="server certificate chain (PEM)")
    parser.add_argument("--key", required=True, help="server private key (PEM)")
    parser.add_argument("--client-ca", help="CAs whose client certificates are accepted (PEM)")
    args = parser.parse_args(argv)
    config = TlsFrontConfig(args.listen, args.upstream, args.cert, args.key, args.client_ca)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    run_until_signalled(lambda: serve_tls_front(config))


if __name__ == "__main__":
    run_tls_front()
