"""CRLs of trust anchors as pure rules: parsing, belonging to the anchor, listing a
certificate, and when to fetch a list again."""

from __future__ import annotations

import datetime as dt

from cryptography.hazmat.primitives import serialization
from hypothesis import given
from hypothesis import strategies as st
from platformkit.testing.pki import crl, issue
from strataplane.domain.certificates import crl_problem, crl_refresh_at, is_revoked, parse_crl

NOW = dt.datetime(2026, 12, 5, 12, 0, tzinfo=dt.UTC)
CA, OTHER = issue("agents CA", ca=True), issue("another CA", ca=True)
PEM = CA.pem().decode()


def test_a_list_in_der_or_pem_is_read_and_anything_else_is_not() -> None:
    made = crl(CA, [7])
    for data in (
        made.public_bytes(serialization.Encoding.DER),
        made.public_bytes(serialization.Encoding.PEM),
    ):
        parsed = parse_crl(data)
        assert parsed is not None
        assert parsed.issuer == CA.cert.subject
    assert parse_crl(b"<html>not found</html>") is None
    assert parse_crl(b"") is None


def test_only_the_anchors_own_signed_list_counts() -> None:
    assert crl_problem(crl(CA, []), PEM) is None
    other = crl_problem(crl(OTHER, []), PEM)
    assert other == "the CRL's issuer is not the anchor or one of its intermediates"
    impostor = issue("agents CA", ca=True)  # the anchor's name, another key
    problem = crl_problem(crl(impostor, []), PEM)
    assert problem == "the CRL's signature does not verify with its issuer's key"


def test_a_listed_serial_is_revoked() -> None:
    leaf = issue("web-1", CA, serial=4242).cert
    assert is_revoked(crl(CA, [1, 4242]), leaf)
    assert not is_revoked(crl(CA, [1, 4243]), leaf)


@given(st.integers(min_value=-86_400, max_value=7 * 86_400), st.floats(1, 600))
def test_a_list_is_fetched_again_at_its_next_update_within_bounds(
    seconds: int, least: float
) -> None:
    made = crl(
        CA, [], now=NOW - dt.timedelta(days=2), next_update=dt.timedelta(days=2, seconds=seconds)
    )
    due = crl_refresh_at(made, NOW, least=least, most=3600)
    assert NOW + dt.timedelta(seconds=least) <= due <= NOW + dt.timedelta(seconds=3600)
    if least <= seconds <= 3600:
        assert due == NOW + dt.timedelta(seconds=seconds)
