"""Telling the workers of a served app that the server is stopping, before it waits for them.

On SIGTERM granian stops accepting connections and waits for the requests in flight to end; the
app's lifespan hears of the stop only after that. A request that waits by design (a long-poll)
therefore holds the stop up until it ends by itself, or until granian kills its worker. So
``start_server`` hands granian a pipe that nobody ever writes to: every worker inherits its read
end, the server keeps the write end, and closes it just before it passes the stop on. In a
worker, :func:`watch` calls back when the pipe reports its end, at once in every worker, and the
app answers what is waiting (an empty long-poll, a WebSocket closed 1012) so the stop is quick.

The environment names the descriptor and the pipe's inode (``"<fd>:<inode>"``), so a worker
started some other way, where that number may be another file, never reads from it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import stat
from collections.abc import Callable

__all__ = ["ENV", "DrainPipe", "watch"]

ENV = "PLATFORMKIT_DRAIN_FD"


class DrainPipe:
    """The server's side: the write end, closed by :meth:`announce`."""

    def __init__(self) -> None:
        self.read_fd, self._write_fd = os.pipe()
        self.env_value = f"{self.read_fd}:{os.fstat(self.read_fd).st_ino}"
        self._announced = False

    def started(self) -> None:
        """The child holds the read end now; this process needs only the write end."""
        with contextlib.suppress(OSError):
            os.close(self.read_fd)

    def announce(self) -> None:
        """Tell every worker the server is stopping (idempotent)."""
        if not self._announced:
            self._announced = True
            with contextlib.suppress(OSError):
                os.close(self._write_fd)


def _inherited_fd() -> int | None:
    """The drain pipe's read end, if this process inherited the one the environment names."""
    fd_text, _, inode = os.environ.get(ENV, "").partition(":")
    try:
        fd, expected = int(fd_text), int(inode)
        info = os.fstat(fd)
    except (ValueError, OSError):
        return None
    if not stat.S_ISFIFO(info.st_mode) or info.st_ino != expected:
        return None
    return fd


def watch(on_drain: Callable[[], None]) -> Callable[[], None] | None:
    """Call ``on_drain`` (once, on the running loop) when the server announces its stop; the
    function that stops watching, or None where this process was not started by
    ``start_server`` (in-process tests, another server)."""
    fd = _inherited_fd()
    if fd is None:
        return None
    loop = asyncio.get_running_loop()

    def readable() -> None:
        try:
            data = os.read(fd, 1)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:  # the write end is closed: the server is stopping
            loop.remove_reader(fd)
            on_drain()

    os.set_blocking(fd, False)
    loop.add_reader(fd, readable)

    def stop() -> None:
        loop.remove_reader(fd)

    return stop
