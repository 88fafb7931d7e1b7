"""The PROXY header parser: every header it writes it reads back, a prefix of a header asks for
more, anything else is refused."""

from __future__ import annotations

import ipaddress

import pytest
from hypothesis import given
from hypothesis import strategies as st
from platformkit.http.proxy_protocol import (
    V1_MAX,
    ProxyHeader,
    ProxyHeaderError,
    encode_v1,
    encode_v2,
    parse,
)

ports = st.integers(min_value=0, max_value=65535)
v4 = st.ip_addresses(v=4).map(str)
v6 = st.ip_addresses(v=6).map(str)
endpoints = st.one_of(st.tuples(v4, ports), st.tuples(v6, ports))
encoders = st.sampled_from([encode_v1, encode_v2])


def same_family(pair: tuple[tuple[str, int], tuple[str, int]]) -> bool:
    a, b = pair
    return ipaddress.ip_address(a[0]).version == ipaddress.ip_address(b[0]).version


@given(st.tuples(endpoints, endpoints).filter(same_family), encoders, st.binary(max_size=64))
def test_a_written_header_reads_back_and_leaves_the_rest(pair, encode, rest) -> None:  # type: ignore[no-untyped-def]
    source, destination = pair
    header = encode(source, destination)
    parsed = parse(header + rest)
    assert parsed == ProxyHeader(
        (str(ipaddress.ip_address(source[0])), source[1]),
        (str(ipaddress.ip_address(destination[0])), destination[1]),
        len(header),
    )


@given(endpoints, encoders, st.data())
def test_every_strict_prefix_asks_for_more(source, encode, data) -> None:  # type: ignore[no-untyped-def]
    header = encode(source)
    cut = data.draw(st.integers(min_value=0, max_value=len(header) - 1))
    assert parse(header[:cut]) is None


@given(st.binary(min_size=1, max_size=200))
def test_anything_else_is_refused_or_incomplete_never_a_crash(data: bytes) -> None:
    try:
        header = parse(data)
    except ProxyHeaderError:
        return
    assert header is None or 0 < header.length <= len(data)


def test_local_and_unknown_carry_no_address() -> None:
    assert parse(encode_v2(None) + b"GET /") == ProxyHeader(None, None, 16)
    assert parse(b"PROXY UNKNOWN\r\nGET /") == ProxyHeader(None, None, 15)
    assert parse(b"PROXY UNKNOWN ffff::1 ::1 1 2\r\n") == ProxyHeader(None, None, 31)


@pytest.mark.parametrize(
    "line",
    [
        b"GET / HTTP/1.1\r\n\r\n",
        b"PROXY TCP4 1.2.3.4 5.6.7.8 80\r\n",
        b"PROXY TCP4 ::1 ::1 80 81\r\n",
        b"PROXY TCP6 1.2.3.4 5.6.7.8 80 81\r\n",
        b"PROXY TCP4 1.2.3.4 5.6.7.8 080 81\r\n",
        b"PROXY TCP4 1.2.3.4 5.6.7.8 65536 81\r\n",
        b"PROXY TCP4 1.2.3.4 5.6.7.8 80 81\n",
        b"PROXY UDP4 1.2.3.4 5.6.7.8 80 81\r\n",
        b"PROXY " + b"1" * V1_MAX,
    ],
)
def test_malformed_v1_lines_are_refused(line: bytes) -> None:
    with pytest.raises(ProxyHeaderError):
        parse(line)


def test_malformed_v2_headers_are_refused() -> None:
    good = encode_v2(("10.0.0.1", 1234), ("10.0.0.2", 80))
    with pytest.raises(ProxyHeaderError, match="version or command"):
        parse(good[:12] + b"\x31" + good[13:])
    with pytest.raises(ProxyHeaderError, match="shorter than its addresses"):
        parse(good[:14] + b"\x00\x04" + good[16:20])
    with pytest.raises(ProxyHeaderError, match="too long"):
        parse(good[:14] + b"\xff\xff")


@given(endpoints, st.booleans())
def test_the_tls_flag_of_v2_reads_back(source, tls) -> None:  # type: ignore[no-untyped-def]
    header = parse(encode_v2(source, tls=tls))
    assert header is not None
    assert header.tls is tls


def test_other_tlvs_and_a_tls_tlv_without_the_client_bit_are_not_tls() -> None:
    plain = encode_v2(("203.0.113.9", 1), ("10.0.0.1", 443))
    size = int.from_bytes(plain[14:16])
    alpn, unverified = b"\x01\x00\x02h2", b"\x20\x00\x05\x00\x00\x00\x00\x00"
    for tlvs, tls in ((alpn, False), (unverified, False), (alpn + b"\x20\x00\x01\x01", True)):
        wire = plain[:14] + (size + len(tlvs)).to_bytes(2) + plain[16:] + tlvs
        header = parse(wire)
        assert header is not None
        assert header.tls is tls
    with pytest.raises(ProxyHeaderError):
        parse(plain[:14] + (size + 3).to_bytes(2) + plain[16:] + b"\x20\x00\x09")
