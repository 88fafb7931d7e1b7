"""Egress rules: a URL whose host resolves to a non-public address is refused unless an allowed
network holds it."""

from __future__ import annotations

import ipaddress

import pytest
from hypothesis import given
from hypothesis import strategies as st
from platformkit.http.egress import egress_problem, networks


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1/crl",
        "http://localhost:8080/crl",
        "http://169.254.169.254/latest/meta-data",  # a cloud's metadata service
        "http://10.1.2.3/x",
        "http://192.168.0.1/x",
        "http://[::1]/x",
        "http://[fe80::1]/x",
        "http://0.0.0.0/x",
        "http://224.0.0.1/x",
    ],
)
async def test_non_public_addresses_are_refused(url: str) -> None:
    problem = await egress_problem(url)
    assert problem is not None
    assert "not a public address" in problem


async def test_an_allowed_network_is_reached() -> None:
    assert await egress_problem("http://127.0.0.1:9/x", networks(["127.0.0.0/8"])) is None
    assert await egress_problem("http://10.1.2.3/x", networks(["10.0.0.0/8"])) is None
    assert await egress_problem("http://10.1.2.3/x", networks(["10.2.0.0/16"])) is not None


async def test_a_public_address_passes_and_bad_urls_are_named() -> None:
    assert await egress_problem("https://8.8.8.8/crl") is None
    assert await egress_problem("ftp://8.8.8.8/x") == "an http or https URL with a host"
    assert await egress_problem("http:///x") == "an http or https URL with a host"
    assert await egress_problem("http://8.8.8.8:99999/x") == "an invalid port"
    assert await egress_problem("http://no-such-host.invalid/x") is not None


@given(st.ip_addresses())
async def test_only_global_unicast_addresses_pass_without_an_allowance(
    ip: ipaddress.IPv4Address | ipaddress.IPv6Address,
) -> None:
    host = f"[{ip}]" if ip.version == 6 else str(ip)
    problem = await egress_problem(f"http://{host}/x")
    assert (problem is None) == (ip.is_global and not ip.is_multicast)
    assert await egress_problem(f"http://{host}/x", networks([f"{ip}/{ip.max_prefixlen}"])) is None
