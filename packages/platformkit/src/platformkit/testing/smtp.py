"""A real SMTP server on loopback (aiosmtpd) that keeps what it receives, for mail tests."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from aiosmtpd.controller import Controller
from aiosmtpd.smtp import Envelope

from platformkit.testing.services import free_port


@dataclass
class SmtpInbox:
    """The server's handler: ``received`` holds each accepted mail's envelope; recipients
    starting ``nobody@`` are refused (550)."""

    port: int = 0
    received: list[Envelope] = field(default_factory=list)

    async def handle_RCPT(
        self, server: Any, session: Any, envelope: Envelope, address: str, options: list[str]
    ) -> str:
        if address.startswith("nobody@"):
            return "550 no such mailbox"
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(self, server: Any, session: Any, envelope: Envelope) -> str:
        self.received.append(envelope)
        return "250 OK"


@contextmanager
def smtp_server(**controller_options: Any) -> Iterator[SmtpInbox]:
    """Run an SMTP server on a free loopback port until the block ends."""
    inbox = SmtpInbox(free_port())
    controller = Controller(inbox, hostname="127.0.0.1", port=inbox.port, **controller_options)
    controller.start()
    try:
        yield inbox
    finally:
        controller.stop()
