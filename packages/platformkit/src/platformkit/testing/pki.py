"""Certificates for tests: a CA, intermediates below it, leaves with the names a test needs,
and CRLs, made with ``cryptography`` (P-256 keys, SHA-256 signatures)."""

from __future__ import annotations

import datetime as dt
import ipaddress
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

__all__ = ["Issued", "crl", "issue"]


@dataclass(frozen=True)
class Issued:
    cert: x509.Certificate
    key: ec.EllipticCurvePrivateKey

    def pem(self) -> bytes:
        return self.cert.public_bytes(serialization.Encoding.PEM)

    def key_pem(self) -> bytes:
        return self.key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )

    def save(self, directory: Path, name: str, chain: Sequence[Issued] = ()) -> tuple[str, str]:
        """``<name>.pem`` (this certificate, then ``chain``) and ``<name>.key``; their paths."""
        cert, key = directory / f"{name}.pem", directory / f"{name}.key"
        cert.write_bytes(self.pem() + b"".join(c.pem() for c in chain))
        key.write_bytes(self.key_pem())
        return str(cert), str(key)


def issue(
    cn: str,
    issuer: Issued | None = None,
    *,
    ca: bool = False,
    dns: Iterable[str] = (),
    ip: str | None = None,
    valid: tuple[dt.datetime, dt.datetime] | None = None,
    serial: int | None = None,
) -> Issued:
    """A certificate for ``cn`` signed by ``issuer`` (self-signed without one), valid from a
    few minutes ago for a day unless ``valid`` says otherwise."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])
    now = dt.datetime.now(dt.UTC)
    start, end = valid or (now - dt.timedelta(minutes=5), now + dt.timedelta(days=1))
    builder = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(issuer.cert.subject if issuer else name)
        .public_key(key.public_key())
        .serial_number(serial or x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(end)
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    )
    names: list[x509.GeneralName] = [x509.DNSName(d) for d in dns]
    if ip:
        names.append(x509.IPAddress(ipaddress.ip_address(ip)))
    if names:
        builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
    return Issued(builder.sign(issuer.key if issuer else key, hashes.SHA256()), key)


def crl(
    issuer: Issued,
    serials: Iterable[int],
    *,
    next_update: dt.timedelta = dt.timedelta(hours=1),
    now: dt.datetime | None = None,
) -> x509.CertificateRevocationList:
    """``issuer``'s list naming ``serials``, updated now, next due after ``next_update``."""
    now = now or dt.datetime.now(dt.UTC)
    builder = (
        x509.CertificateRevocationListBuilder()
        .issuer_name(issuer.cert.subject)
        .last_update(now - dt.timedelta(minutes=1))
        .next_update(now + next_update)
    )
    for serial in serials:
        entry = x509.RevokedCertificateBuilder().serial_number(serial).revocation_date(now)
        builder = builder.add_revoked_certificate(entry.build())
    return builder.sign(issuer.key, hashes.SHA256())
