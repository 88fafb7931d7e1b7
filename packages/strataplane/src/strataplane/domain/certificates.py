"""Client certificates against a tenant's trust anchors (schema: trust_anchor): parsing an
anchor, and deciding whether a presented certificate is issued by one and names the host.

An anchor's PEM is its CA certificate, optionally followed by intermediate CAs below it (each
issued by the anchor or by an intermediate before it). A certificate is accepted when the
anchor or one of its intermediates signed it, it and its issuer's path up to the anchor are
valid now, and the anchor's ``host_mapping`` finds the agent's host in it: ``san-dns`` a DNS
name of its subject alternative names, ``cn`` its common name, ``san-uri-spiffe`` a
``spiffe://`` URI whose last path segment is the host name. The anchor's CRL is the list of the
CA of the bundle that issues the agents' certificates: it answers for the certificates that CA
issued.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.x509.oid import NameOID

__all__ = [
    "Presented",
    "anchor_problem",
    "crl_problem",
    "crl_refresh_at",
    "fingerprint",
    "host_matches",
    "is_revoked",
    "issued_by",
    "issuer_in",
    "parse_crl",
    "parse_der",
]

HOST_MAPPINGS = ("san-dns", "cn", "san-uri-spiffe")
MAX_PEM = 64 * 1024


@dataclass(frozen=True)
class Presented:
    cert: x509.Certificate
    fingerprint: bytes
    subject: str
    not_after: datetime


def fingerprint(der: bytes) -> bytes:
    return hashlib.sha256(der).digest()


def parse_der(der: bytes) -> Presented | None:
    try:
        cert = x509.load_der_x509_certificate(der)
    except ValueError:
        return None
    subject = cert.subject.rfc4514_string()
    return Presented(cert, fingerprint(der), subject, cert.not_valid_after_utc)


MAX_BUNDLE = 8


def _bundle(pem: str) -> list[x509.Certificate]:
    try:
        return x509.load_pem_x509_certificates(pem.encode())
    except ValueError:
        return []


def _issued(cert: x509.Certificate, issuer: x509.Certificate) -> bool:
    try:
        cert.verify_directly_issued_by(issuer)
    except (ValueError, TypeError, InvalidSignature):
        return False
    return True


def _is_ca(cert: x509.Certificate) -> bool:
    try:
        basic = cert.extensions.get_extension_for_class(x509.BasicConstraints).value
    except x509.ExtensionNotFound:
        return False
    return basic.ca


def anchor_problem(pem: str) -> str | None:
    """Why ``pem`` is not a usable anchor (a CA certificate, then intermediates below it),
    None when it is."""
    if len(pem) > MAX_PEM:
        return f"at most {MAX_PEM} characters"
    certs = _bundle(pem)
    if not certs:
        return "not a PEM certificate"
    if len(certs) > MAX_BUNDLE:
        return f"at most {MAX_BUNDLE} certificates: the anchor and its intermediates"
    for n, cert in enumerate(certs):
        what = "the certificate" if n == 0 else f"certificate {n + 1}"
        try:
            cert.extensions.get_extension_for_class(x509.BasicConstraints)
        except x509.ExtensionNotFound:
            return f"{what} has no basicConstraints: it is not a CA"
        if not _is_ca(cert):
            return f"{what} is not a CA (basicConstraints ca=false)"
        if n and not any(_issued(cert, above) for above in certs[:n]):
            return f"{what} was not issued by the anchor or an intermediate before it"
    return None


def _valid(cert: x509.Certificate, now: datetime) -> bool:
    return cert.not_valid_before_utc <= now <= cert.not_valid_after_utc


def issuer_in(
    presented: x509.Certificate, anchor_pem: str, now: datetime | None = None
) -> x509.Certificate | None:
    """The CA of the anchor's bundle that issued ``presented`` when the certificate and the
    path from that CA up to the anchor are valid now; None otherwise."""
    now = now or datetime.now(UTC)
    certs = _bundle(anchor_pem)
    if not certs or not _valid(presented, now):
        return None
    for n, ca in enumerate(certs):
        if _issued(presented, ca) and _path_valid(certs, n, now):
            return ca
    return None


def _path_valid(certs: list[x509.Certificate], n: int, now: datetime) -> bool:
    """The bundle's certificate ``n`` is valid now and chains up to the anchor (``certs[0]``)
    through valid certificates before it."""
    seen = {n}
    while True:
        if not _valid(certs[n], now):
            return False
        if n == 0:
            return True
        above = next((i for i in range(n) if i not in seen and _issued(certs[n], certs[i])), None)
        if above is None:
            return False
        seen.add(above)
        n = above


def issued_by(presented: x509.Certificate, anchor_pem: str, now: datetime | None = None) -> bool:
    return issuer_in(presented, anchor_pem, now) is not None


def host_matches(presented: x509.Certificate, mapping: str, host: str) -> bool:
    host = host.lower().rstrip(".")
    try:
        san = presented.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        san = None
    if mapping == "san-dns":
        names = san.get_values_for_type(x509.DNSName) if san is not None else []
        return any(n.lower().rstrip(".") == host for n in names)
    if mapping == "cn":
        cns = presented.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
        return any(str(a.value).lower().rstrip(".") == host for a in cns)
    if mapping == "san-uri-spiffe":
        uris = san.get_values_for_type(x509.UniformResourceIdentifier) if san is not None else []
        return any(u.startswith("spiffe://") and u.rsplit("/", 1)[-1].lower() == host for u in uris)
    return False


MAX_CRL = 8 * 1024 * 1024


def parse_crl(data: bytes) -> x509.CertificateRevocationList | None:
    """A CRL as a distribution point serves it (DER, or PEM), None when it is neither."""
    if len(data) > MAX_CRL:
        return None
    try:
        if data.lstrip().startswith(b"-----BEGIN"):
            return x509.load_pem_x509_crl(data)
        return x509.load_der_x509_crl(data)
    except ValueError:
        return None


def crl_problem(crl: x509.CertificateRevocationList, anchor_pem: str) -> str | None:
    """Why ``crl`` is not the list of a CA of the anchor's bundle (issuer and signature), None
    when it is."""
    issuer = next((c for c in _bundle(anchor_pem) if c.subject == crl.issuer), None)
    if issuer is None:
        return "the CRL's issuer is not the anchor or one of its intermediates"
    try:
        valid = crl.is_signature_valid(issuer.public_key())  # type: ignore[arg-type]
    except (TypeError, ValueError):
        valid = False
    return None if valid else "the CRL's signature does not verify with its issuer's key"


def is_revoked(crl: x509.CertificateRevocationList, cert: x509.Certificate) -> bool | None:
    """Whether the list names ``cert``; None when the list is not its issuer's (it cannot
    say)."""
    if crl.issuer != cert.issuer:
        return None
    return crl.get_revoked_certificate_by_serial_number(cert.serial_number) is not None


def crl_refresh_at(
    crl: x509.CertificateRevocationList, now: datetime, *, least: float = 60, most: float = 3600
) -> datetime:
    """When to fetch the list again: its nextUpdate, kept within ``least`` .. ``most`` seconds."""
    due = crl.next_update_utc or now + timedelta(seconds=most)
    return min(max(due, now + timedelta(seconds=least)), now + timedelta(seconds=most))
