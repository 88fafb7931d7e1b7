"""Sending mail: by SMTP when configured, else into a local outbox folder.

A system builds one ``Mailer`` from its settings with :func:`mailer_for` and calls
``await mailer.send(Mail(...))``. With no SMTP host configured, each mail is written as an
RFC 5322 ``.eml`` file into the outbox folder (mode 0600) and one log line names the file, so a
newcomer without a mail server still gets the invitation or reset link. With an SMTP host,
``aiosmtplib`` delivers it (implicit TLS, STARTTLS or plain, with optional login).

Sending fails loudly: :class:`MailError` carries a sentence without credentials, and the
caller decides whether the action it belongs to still stands.
"""

from __future__ import annotations

import asyncio
import logging
import os
from dataclasses import dataclass
from email.message import EmailMessage
from email.utils import formatdate, make_msgid
from enum import StrEnum
from pathlib import Path
from typing import Protocol

import aiosmtplib

from platformkit.ids import uuid7

__all__ = [
    "Mail",
    "MailError",
    "Mailer",
    "OutboxMailer",
    "SmtpMailer",
    "SmtpSecurity",
    "mailer_for",
]

log = logging.getLogger("platformkit.mail")


class MailError(Exception):
    """A mail could not be handed on; the message names the server, never a credential."""


@dataclass(frozen=True)
class Mail:
    to: str
    subject: str
    text: str


class Mailer(Protocol):
    @property
    def sender(self) -> str: ...

    async def send(self, mail: Mail) -> None: ...


def _message(sender: str, mail: Mail) -> EmailMessage:
    if any(c in mail.to + mail.subject for c in "\r\n"):
        raise MailError("a recipient or subject holds a line break")
    message = EmailMessage()
    message["From"] = sender
    message["To"] = mail.to
    message["Subject"] = mail.subject
    message["Date"] = formatdate(localtime=False)
    message["Message-ID"] = make_msgid(domain=sender.rpartition("@")[2] or None)
    message.set_content(mail.text)
    return message


@dataclass(frozen=True)
class OutboxMailer:
    """Writes each mail as ``<uuid7>.eml`` into ``folder`` (created 0700 when missing)."""

    folder: Path
    sender: str = "z4j@localhost"

    async def send(self, mail: Mail) -> None:
        data = bytes(_message(self.sender, mail))
        path = await asyncio.to_thread(self._write, data)
        log.info("mail to %s written to %s (no SMTP server configured)", mail.to, path)

    def _write(self, data: bytes) -> Path:
        self.folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        path = self.folder / f"{uuid7()}.eml"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        return path


class SmtpSecurity(StrEnum):
    NONE = "none"  # plain SMTP (a relay on loopback or a trusted network)
    STARTTLS = "starttls"  # upgrade on the submission port, usually 587
    TLS = "tls"  # implicit TLS, usually 465


@dataclass(frozen=True)
class SmtpMailer:
    host: str
    port: int
    sender: str
    security: SmtpSecurity = SmtpSecurity.STARTTLS
    username: str | None = None
    password: str | None = None
    timeout: float = 30.0

    async def send(self, mail: Mail) -> None:
        message = _message(self.sender, mail)
        try:
            await aiosmtplib.send(
                message,
                hostname=self.host,
                port=self.port,
                username=self.username,
                password=self.password,
                use_tls=self.security is SmtpSecurity.TLS,
                start_tls=self.security is SmtpSecurity.STARTTLS,
                timeout=self.timeout,
            )
        except (aiosmtplib.SMTPException, OSError) as exc:
            raise MailError(
                f"the SMTP server {self.host}:{self.port} did not take the mail "
                f"({type(exc).__name__})"
            ) from exc
        log.info("mail to %s handed to %s:%s", mail.to, self.host, self.port)


def mailer_for(
    *,
    outbox: Path,
    sender: str,
    smtp_host: str | None = None,
    smtp_port: int | None = None,
    security: SmtpSecurity = SmtpSecurity.STARTTLS,
    username: str | None = None,
    password: str | None = None,
) -> Mailer:
    """SMTP when ``smtp_host`` is set (port by default from ``security``), else the outbox."""
    if not smtp_host:
        return OutboxMailer(outbox, sender)
    default_port = {SmtpSecurity.NONE: 25, SmtpSecurity.STARTTLS: 587, SmtpSecurity.TLS: 465}
    return SmtpMailer(
        smtp_host,
        smtp_port or default_port[security],
        sender,
        security,
        username or None,
        password or None,
    )
