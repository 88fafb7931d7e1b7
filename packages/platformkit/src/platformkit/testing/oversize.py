"""Oversize bodies sent to a real server, and the memory of the processes serving them.

``send_body`` writes a request head, then body bytes from a thread until the server answers
(a refusal usually comes long before the body ends), and returns the status with the bytes it
managed to send. ``tree_rss_kb`` adds up the resident memory of a process and its descendants,
from ``/proc`` (Linux), so a test can check that refusing a body did not make a worker read it.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Answer", "chunked", "send_body", "tree_rss_kb"]

MIB = 1 << 20


@dataclass(frozen=True)
class Answer:
    status: int
    head: bytes  # the status line and headers, with whatever of the body came along
    sent: int  # body bytes written before the server answered or closed


def chunked(total: int, size: int = 64 * 1024) -> Iterable[bytes]:
    """``total`` bytes of ``x`` in HTTP/1.1 chunked framing (no final chunk: the server answers
    first)."""
    frame = f"{size:x}\r\n".encode() + b"x" * size + b"\r\n"
    for _ in range(total // size):
        yield frame


def send_body(
    host: str, port: int, head: str, body: Iterable[bytes], *, timeout: float = 60.0
) -> Answer:
    """Send ``head`` (request line and headers, ending in a blank line), then ``body``."""
    sent = 0
    with socket.create_connection((host, port), timeout=timeout) as sock:
        sock.sendall(head.encode())

        def write() -> None:
            nonlocal sent
            for chunk in body:
                try:
                    sock.sendall(chunk)
                except OSError:  # answered and closed, or shut down below
                    return
                sent += len(chunk)

        writer = threading.Thread(target=write, daemon=True)
        writer.start()
        answer = b""
        while b"\r\n\r\n" not in answer:
            more = sock.recv(65536)
            if not more:
                break
            answer += more
        with contextlib.suppress(OSError):  # the server may have closed it already
            sock.shutdown(socket.SHUT_RDWR)
        writer.join(timeout)
    status = int(answer.split(b" ", 2)[1]) if answer.startswith(b"HTTP/") else 0
    return Answer(status, answer, sent)


def _children(pid: int) -> list[int]:
    found: list[int] = []
    with contextlib.suppress(OSError):
        for task in Path(f"/proc/{pid}/task").iterdir():
            text = (task / "children").read_text()
            found.extend(int(child) for child in text.split())
    return found


def tree_rss_kb(pid: int) -> int:
    """The resident memory, in KiB, of ``pid`` and every process below it."""
    total, pending = 0, [pid]
    while pending:
        current = pending.pop()
        with contextlib.suppress(OSError):
            for line in Path(f"/proc/{current}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
                    break
        pending.extend(_children(current))
    return total
