"""The PROXY protocol header (versions 1 and 2) that layer-4 load balancers put in front of a
connection to tell the server whom the connection really came from.

Pure functions over bytes: :func:`parse` reads a header from the start of a buffer,
:func:`encode_v1` and :func:`encode_v2` write one (for clients and tests). A header is all or
nothing: a buffer that is a strict prefix of a valid header asks for more bytes, anything else
that is not a header is an error, so a connection that does not start with one can be refused
before a single byte reaches the application.
"""

from __future__ import annotations

import ipaddress
import struct
from dataclasses import dataclass

__all__ = [
    "V1_MAX",
    "V2_SIGNATURE",
    "ProxyHeader",
    "ProxyHeaderError",
    "encode_v1",
    "encode_v2",
    "parse",
]

V1_PREFIX = b"PROXY "
V1_MAX = 107  # the longest v1 line, CRLF included
V2_SIGNATURE = b"\r\n\r\n\x00\r\nQUIT\n"
_V2_FIXED = 16  # signature, version/command, family/transport, length
_V2_MAX_PAYLOAD = 4096  # addresses and TLVs; far above any real load balancer's header

type Endpoint = tuple[str, int]
_ANY = {4: "0.0.0.0", 6: "::"}  # noqa: S104 - an address written into a header, not bound


class ProxyHeaderError(ValueError):
    """The bytes are not a valid PROXY header."""


@dataclass(frozen=True, slots=True)
class ProxyHeader:
    """A parsed header: ``source``/``destination`` are ``None`` for a connection the proxy made
    itself (v2 LOCAL, v1 UNKNOWN, or an address family other than IPv4/IPv6)."""

    source: Endpoint | None
    destination: Endpoint | None
    length: int  # bytes of the buffer the header took
    tls: bool = False  # v2 only: the client reached the load balancer over TLS (PP2_TYPE_SSL)


def parse(buffer: bytes) -> ProxyHeader | None:
    """The header at the start of ``buffer``, or ``None`` while it may still become one."""
    if buffer[: len(V2_SIGNATURE)] == V2_SIGNATURE[: len(buffer)] and buffer[:1] == b"\r":
        return _parse_v2(buffer)
    if buffer[: len(V1_PREFIX)] == V1_PREFIX[: len(buffer)]:
        return _parse_v1(buffer)
    raise ProxyHeaderError("the connection does not start with a PROXY header")


def _parse_v1(buffer: bytes) -> ProxyHeader | None:
    end = buffer.find(b"\r\n", 0, V1_MAX)
    if end < 0:
        if len(buffer) >= V1_MAX or b"\n" in buffer[:V1_MAX]:
            raise ProxyHeaderError("PROXY v1 line is too long or not ended by CRLF")
        return None
    fields = buffer[len(V1_PREFIX) : end].decode("ascii", "replace").split(" ")
    length = end + 2
    if fields[0] == "UNKNOWN":
        return ProxyHeader(None, None, length)
    if len(fields) != 5 or fields[0] not in ("TCP4", "TCP6"):
        raise ProxyHeaderError("PROXY v1 line must be 'TCP4|TCP6 src dst sport dport'")
    version = 4 if fields[0] == "TCP4" else 6
    source = (_v1_address(fields[1], version), _v1_port(fields[3]))
    destination = (_v1_address(fields[2], version), _v1_port(fields[4]))
    return ProxyHeader(source, destination, length)


def _v1_address(text: str, version: int) -> str:
    try:
        address = ipaddress.ip_address(text)
    except ValueError:
        raise ProxyHeaderError(f"PROXY v1 address {text!r} is not an IP address") from None
    if address.version != version:
        raise ProxyHeaderError(f"PROXY v1 address {text!r} does not match its family")
    return str(address)


def _v1_port(text: str) -> int:
    if not text.isdigit() or (len(text) > 1 and text[0] == "0") or int(text) > 65535:
        raise ProxyHeaderError(f"PROXY v1 port {text!r} is not 0-65535 without leading zeros")
    return int(text)


def _parse_v2(buffer: bytes) -> ProxyHeader | None:
    if len(buffer) < _V2_FIXED:
        return None
    version_command, family, size = buffer[12], buffer[13], struct.unpack("!H", buffer[14:16])[0]
    if version_command >> 4 != 2 or version_command & 0x0F > 1:
        raise ProxyHeaderError("PROXY v2 header has an unknown version or command")
    if size > _V2_MAX_PAYLOAD:
        raise ProxyHeaderError("PROXY v2 header is too long")
    length = _V2_FIXED + size
    if len(buffer) < length:
        return None
    payload = buffer[_V2_FIXED:length]
    if version_command & 0x0F == 0:  # LOCAL: the proxy's own connection, e.g. a health check
        return ProxyHeader(None, None, length)
    if family >> 4 == 1:
        return _v2_addresses(payload, 4, length)
    if family >> 4 == 2:
        return _v2_addresses(payload, 16, length)
    if family >> 4 in (0, 3):  # unspecified, unix: no address to report
        return ProxyHeader(None, None, length)
    raise ProxyHeaderError("PROXY v2 header has an unknown address family")


def _v2_addresses(payload: bytes, width: int, length: int) -> ProxyHeader:
    if len(payload) < 2 * width + 4:
        raise ProxyHeaderError("PROXY v2 header is shorter than its addresses")
    source = ipaddress.ip_address(payload[:width])
    destination = ipaddress.ip_address(payload[width : 2 * width])
    sport, dport = struct.unpack("!HH", payload[2 * width : 2 * width + 4])
    tls = _client_tls(payload[2 * width + 4 :])
    return ProxyHeader((str(source), sport), (str(destination), dport), length, tls)


_PP2_TYPE_SSL, _PP2_CLIENT_SSL = 0x20, 0x01


def _client_tls(tlvs: bytes) -> bool:
    """Whether the TLVs after the addresses hold PP2_TYPE_SSL with the PP2_CLIENT_SSL bit."""
    at = 0
    while at + 3 <= len(tlvs):
        kind, size = tlvs[at], struct.unpack("!H", tlvs[at + 1 : at + 3])[0]
        value = tlvs[at + 3 : at + 3 + size]
        if len(value) < size:
            raise ProxyHeaderError("PROXY v2 TLV is longer than the header")
        if kind == _PP2_TYPE_SSL and value[:1] and value[0] & _PP2_CLIENT_SSL:
            return True
        at += 3 + size
    return False


def encode_v1(source: Endpoint | None, destination: Endpoint | None = None) -> bytes:
    """A v1 line; ``source=None`` gives ``PROXY UNKNOWN``."""
    if source is None:
        return b"PROXY UNKNOWN\r\n"
    src = ipaddress.ip_address(source[0])
    dst_host, dst_port = destination or (_ANY[src.version], 0)
    family = "TCP4" if src.version == 4 else "TCP6"
    line = f"PROXY {family} {src} {ipaddress.ip_address(dst_host)} {source[1]} {dst_port}\r\n"
    return line.encode("ascii")


def encode_v2(
    source: Endpoint | None, destination: Endpoint | None = None, *, tls: bool = False
) -> bytes:
    """A v2 header; ``source=None`` gives the LOCAL command; ``tls`` adds PP2_TYPE_SSL with the
    client-over-TLS bit (verified, no sub-TLVs)."""
    if source is None:
        return V2_SIGNATURE + bytes([0x20, 0x00]) + struct.pack("!H", 0)
    src = ipaddress.ip_address(source[0])
    dst_host, dst_port = destination or (_ANY[src.version], 0)
    dst = ipaddress.ip_address(dst_host)
    payload = src.packed + dst.packed + struct.pack("!HH", source[1], dst_port)
    if tls:
        payload += struct.pack("!BHBI", _PP2_TYPE_SSL, 5, _PP2_CLIENT_SSL, 0)
    family = 0x11 if src.version == 4 else 0x21
    return V2_SIGNATURE + bytes([0x21, family]) + struct.pack("!H", len(payload)) + payload
