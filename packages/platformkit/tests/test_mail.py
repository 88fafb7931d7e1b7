"""Mail: the outbox folder by default, a real SMTP server on loopback (aiosmtpd) otherwise."""

from __future__ import annotations

import email
import os
from collections.abc import Iterator
from email import policy
from pathlib import Path
from typing import Any

import pytest
from aiosmtpd.smtp import AuthResult, LoginPassword
from platformkit.mail import (
    Mail,
    MailError,
    OutboxMailer,
    SmtpMailer,
    SmtpSecurity,
    mailer_for,
)
from platformkit.testing.services import free_port
from platformkit.testing.smtp import SmtpInbox, smtp_server


def _authenticate(server: Any, session: Any, envelope: Any, mechanism: str, data: Any) -> Any:
    ok = isinstance(data, LoginPassword) and (data.login, data.password) == (b"mailer", b"s3cret")
    return AuthResult(success=ok)


@pytest.fixture
def inbox() -> Iterator[SmtpInbox]:
    with smtp_server(authenticator=_authenticate, auth_require_tls=False) as server:
        yield server


async def test_without_smtp_a_mail_lands_in_the_outbox(tmp_path: Path) -> None:
    mailer = mailer_for(outbox=tmp_path / "outbox", sender="brain@example.com")
    assert isinstance(mailer, OutboxMailer)
    await mailer.send(Mail("ada@example.com", "You are invited", "Open https://x/invite/abc"))
    (path,) = (tmp_path / "outbox").iterdir()
    assert path.suffix == ".eml"
    assert path.stat().st_mode & 0o777 == 0o600
    message = email.message_from_bytes(path.read_bytes(), policy=policy.default)
    assert message["To"] == "ada@example.com"
    assert message["From"] == "brain@example.com"
    assert "https://x/invite/abc" in message.get_body().get_content()  # type: ignore[union-attr]


async def test_smtp_delivers_to_a_real_server_with_login(inbox: SmtpInbox) -> None:
    mailer = SmtpMailer(
        "127.0.0.1", inbox.port, "brain@example.com", SmtpSecurity.NONE, "mailer", "s3cret"
    )
    await mailer.send(Mail("ada@example.com", "Reset your password", "the link"))
    (envelope,) = inbox.received
    assert envelope.mail_from == "brain@example.com"
    assert envelope.rcpt_tos == ["ada@example.com"]
    assert isinstance(envelope.content, bytes)
    assert b"Subject: Reset your password" in envelope.content


async def test_a_refused_mail_is_a_mail_error_without_the_password(inbox: SmtpInbox) -> None:
    port = inbox.port
    mailer = SmtpMailer("127.0.0.1", port, "b@example.com", SmtpSecurity.NONE, "mailer", "s3cret")
    with pytest.raises(MailError) as caught:
        await mailer.send(Mail("nobody@example.com", "s", "t"))
    assert inbox.received == []
    assert "s3cret" not in str(caught.value)
    assert f"127.0.0.1:{port}" in str(caught.value)


async def test_a_server_that_is_down_is_a_mail_error() -> None:
    mailer = SmtpMailer("127.0.0.1", free_port(), "b@example.com", SmtpSecurity.NONE)
    with pytest.raises(MailError):
        await mailer.send(Mail("ada@example.com", "s", "t"))


async def test_a_header_injection_is_refused(tmp_path: Path) -> None:
    mailer = OutboxMailer(tmp_path)
    with pytest.raises(MailError):
        await mailer.send(Mail("ada@example.com\r\nBcc: eve@example.com", "s", "t"))
    assert not any(os.scandir(tmp_path))


def test_the_smtp_port_follows_the_security_by_default(tmp_path: Path) -> None:
    made = mailer_for(outbox=tmp_path, sender="b@x", smtp_host="mx", security=SmtpSecurity.TLS)
    assert isinstance(made, SmtpMailer)
    assert made.port == 465
