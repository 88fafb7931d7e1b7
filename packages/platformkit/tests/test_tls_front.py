"""The agents' TLS front over real sockets, relaying to a real granian server: a verified
client certificate reaches the application as X-Client-Cert (base64 DER), a client's own
X-Client-Cert never does, a client without a certificate still connects, and a certificate of
another CA fails the handshake."""

from __future__ import annotations

import base64
import ssl
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from cryptography.hazmat.primitives import serialization
from fastapi import FastAPI, Request
from platformkit.http import create_app, start_server
from platformkit.http.tls_front import TlsFrontConfig, serve_tls_front
from platformkit.testing.pki import issue
from platformkit.testing.services import free_port

HERE = Path(__file__).parent
TARGET = f"{Path(__file__).stem}:make_app"


def make_app() -> FastAPI:
    app = create_app(title="tls-front-test", version="1")

    @app.get("/echo")
    async def echo(request: Request) -> dict[str, str]:
        return {
            "cert": request.headers.get("x-client-cert", ""),
            "forwarded": request.headers.get("x-forwarded-for", ""),
            "proto": request.headers.get("x-forwarded-proto", ""),
        }

    return app


@dataclass
class Files:
    ca: str
    server: tuple[str, str]
    client: tuple[str, str]
    stranger: tuple[str, str]
    client_der: bytes


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> Files:
    d = tmp_path_factory.mktemp("tls")
    ca, other = issue("ca", ca=True), issue("other", ca=True)
    (d / "ca.pem").write_bytes(ca.pem())
    client = issue("agent", ca)
    return Files(
        str(d / "ca.pem"),
        issue("front", ca, ip="127.0.0.1").save(d, "server"),
        client.save(d, "client"),
        issue("agent", other).save(d, "stranger"),
        client.cert.public_bytes(serialization.Encoding.DER),
    )


@pytest.fixture(scope="module")
def upstream() -> Iterator[int]:
    port = free_port()
    server = start_server(TARGET, port=port, factory=True, working_dir=HERE)
    try:
        server.wait_ready()
        yield port
    finally:
        server.stop()


@pytest.fixture
async def front(upstream: int, files: Files) -> AsyncIterator[int]:
    port = free_port()
    config = TlsFrontConfig(
        ("127.0.0.1", port), ("127.0.0.1", upstream), *files.server, client_ca=files.ca
    )
    async with await serve_tls_front(config):
        yield port


def _client(port: int, files: Files, cert: tuple[str, str] | None) -> httpx.AsyncClient:
    context = ssl.create_default_context(cafile=files.ca)
    if cert is not None:
        context.load_cert_chain(*cert)
    return httpx.AsyncClient(base_url=f"https://127.0.0.1:{port}", verify=context)


async def test_the_verified_certificate_reaches_the_app(front: int, files: Files) -> None:
    async with _client(front, files, files.client) as http:
        seen = (await http.get("/echo", headers={"X-Client-Cert": "forged"})).json()
    assert base64.b64decode(seen["cert"]) == files.client_der
    assert seen["forwarded"] == "127.0.0.1"
    assert seen["proto"] == "https"


async def test_no_certificate_connects_and_a_forged_header_is_dropped(
    front: int, files: Files
) -> None:
    async with _client(front, files, None) as http:
        seen = (await http.get("/echo", headers={"X-Client-Cert": "forged"})).json()
    assert seen["cert"] == ""


async def test_a_certificate_of_another_ca_fails_the_handshake(front: int, files: Files) -> None:
    async with _client(front, files, files.stranger) as http:
        with pytest.raises((httpx.ConnectError, httpx.ReadError, httpx.RemoteProtocolError)):
            await http.get("/echo")
