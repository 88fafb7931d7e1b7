"""Session and link credentials (``platformkit.http.session_secrets``): what is minted parses
back, anything else parses to None without raising, only the digest is kept and compared, and
a CSRF token belongs to one secret."""

from __future__ import annotations

import uuid

from hypothesis import given
from hypothesis import strategies as st
from platformkit.http import session_secrets as s


@given(st.uuids(), st.uuids())
def test_a_minted_credential_parses_back(tenant: uuid.UUID, row: uuid.UUID) -> None:
    minted = s.mint(tenant, row)
    assert s.parse(str(minted)) == minted
    assert s.matches(s.digest(minted.secret), minted.secret)
    assert not s.matches(s.digest(minted.secret), minted.secret + "x")


@given(st.text(max_size=300))
def test_anything_else_is_none(text: str) -> None:
    parsed = s.parse(text)
    assert parsed is None or str(parsed) == text


def test_csrf_tokens_belong_to_their_secret() -> None:
    one, two = s.mint(uuid.uuid4(), uuid.uuid4()), s.mint(uuid.uuid4(), uuid.uuid4())
    assert s.csrf_valid(one.secret, s.csrf_token(one.secret))
    assert not s.csrf_valid(one.secret, s.csrf_token(two.secret))
    assert not s.csrf_valid(one.secret, None)
    assert not s.csrf_valid(one.secret, "")
