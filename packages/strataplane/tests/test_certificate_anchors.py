"""Trust anchors with intermediate CAs, as pure rules: what an anchor's PEM may hold, which CA
of it issued a certificate (with the path up to the anchor valid), and which CRL answers for
which certificate."""

from __future__ import annotations

import datetime as dt

from platformkit.testing.pki import Issued, crl, issue
from strataplane.domain.certificates import anchor_problem, crl_problem, is_revoked, issuer_in


def _pem(*certs: Issued) -> str:
    return b"".join(c.pem() for c in certs).decode()


ROOT = issue("root", ca=True)
ISSUING = issue("issuing", ROOT, ca=True)
DEEPER = issue("deeper", ISSUING, ca=True)
STRAY = issue("stray", issue("other root", ca=True), ca=True)


def test_an_anchor_is_a_ca_then_intermediates_below_it() -> None:
    assert anchor_problem(_pem(ROOT)) is None
    assert anchor_problem(_pem(ROOT, ISSUING, DEEPER)) is None
    assert anchor_problem(_pem(ROOT, STRAY)) == (
        "certificate 2 was not issued by the anchor or an intermediate before it"
    )
    assert anchor_problem(_pem(ROOT, DEEPER)) is not None  # its issuer is missing
    leaf = issue("web-1", ISSUING)
    assert anchor_problem(_pem(ROOT, leaf)) == (
        "certificate 2 is not a CA (basicConstraints ca=false)"
    )
    assert anchor_problem(_pem(*[ROOT] * 9)) is not None
    assert anchor_problem("garbage") == "not a PEM certificate"


def test_the_issuing_ca_of_the_bundle_is_found_with_its_path_valid() -> None:
    now = dt.datetime.now(dt.UTC)  # the module's certificates are valid from before now
    bundle = _pem(ROOT, ISSUING, DEEPER)
    by_issuing = issue("web-1", ISSUING).cert
    assert issuer_in(by_issuing, bundle, now) == ISSUING.cert
    assert issuer_in(issue("web-2", DEEPER).cert, bundle, now) == DEEPER.cert
    assert issuer_in(issue("web-3", ROOT).cert, bundle, now) == ROOT.cert
    assert issuer_in(by_issuing, _pem(ROOT), now) is None  # the intermediate is not in it
    assert issuer_in(issue("web-4", STRAY).cert, bundle, now) is None
    # an expired intermediate ends its path, whatever it issued
    past = (now - dt.timedelta(days=30), now - dt.timedelta(days=1))
    expired = issue("expired", ROOT, ca=True, valid=past)
    assert issuer_in(issue("web-5", expired).cert, _pem(ROOT, expired), now) is None
    assert issuer_in(by_issuing, bundle, now + dt.timedelta(days=2)) is None  # itself expired


def test_a_crl_answers_only_for_what_its_ca_issued() -> None:
    bundle = _pem(ROOT, ISSUING)
    leaf = issue("web-1", ISSUING).cert
    assert crl_problem(crl(ISSUING, []), bundle) is None
    assert crl_problem(crl(ISSUING, []), _pem(ROOT)) is not None
    assert is_revoked(crl(ISSUING, [leaf.serial_number]), leaf) is True
    assert is_revoked(crl(ISSUING, [leaf.serial_number + 1]), leaf) is False
    assert is_revoked(crl(ROOT, [leaf.serial_number]), leaf) is None  # not its issuer's list
