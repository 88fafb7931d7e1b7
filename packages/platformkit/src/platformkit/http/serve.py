"""Running an app under granian, for each system's ``serve`` command and for tests.

granian runs in a child process (``python -m granian``) rather than inside the caller, because
prometheus-client decides at import time whether it is in multiprocess mode: with several
workers the child must start with ``PROMETHEUS_MULTIPROC_DIR`` already set, in a fresh directory
that no earlier run left samples in. The child also gets a logging config that makes granian's
own lines JSON like ours; granian's access log stays off (the kernel middleware writes one with
route templates). :func:`serve` forwards SIGINT and SIGTERM, waits, and removes the directory.
Before the stop reaches granian, its workers are told through a pipe (:mod:`.drain`), so what
waits by design (long-polls) can answer at once instead of holding the stop up.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any

from platformkit.http.drain import ENV as DRAIN_ENV
from platformkit.http.drain import DrainPipe

if TYPE_CHECKING:
    from platformkit.http.tls_front import TlsFrontConfig
from platformkit.http.logs import logging_config

__all__ = ["Server", "import_path", "serve", "start_server"]

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"
RUNTIME_MODE_ENV = "GRANIAN_RUNTIME_MODE"

# Seconds granian gives a worker to stop after SIGTERM before it kills it. granian's own default
# is to wait forever, and a worker can deadlock while its runtime shuts down; a server that
# never exits on SIGTERM is worse than one whose stuck worker is killed.
WORKERS_KILL_TIMEOUT = 10

# Seconds between telling the workers that the server is stopping (the drain pipe) and the
# signal, for an app that watches the drain: granian drops open WebSockets as soon as it stops,
# so a close frame written in the same instant may not reach the client. Other apps pass 0 (the
# default) and stop at once.
DRAIN_GRACE_S = 0.5


def import_path(target: str | Callable[[], Any]) -> tuple[str, bool]:
    """``("module:attr", is_factory)`` for an import string or a module-level factory."""
    if isinstance(target, str):
        return target, False
    module, name = getattr(target, "__module__", None), getattr(target, "__qualname__", "")
    if not module or module == "__main__" or "<locals>" in name:
        raise ValueError("the app factory must be a module-level function of an importable module")
    return f"{module}:{name}", True


@dataclass
class Server:
    """A granian child process and the directory holding its logging config and metrics."""

    process: subprocess.Popen[bytes]
    runtime_dir: Path
    host: str
    port: int
    drain_pipe: DrainPipe | None = None
    drain_grace_s: float = 0.0

    def wait_ready(self, timeout: float = 30.0) -> None:
        """Block until the port accepts connections; raise if granian exits or time runs out."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"granian exited with status {self.process.returncode}")
            try:
                with socket.create_connection((self.host, self.port), timeout=0.5):
                    return
            except OSError:
                time.sleep(0.05)
        raise TimeoutError(f"granian did not listen on {self.host}:{self.port} in {timeout}s")

    def wait(self) -> int:
        try:
            return self.process.wait()
        finally:
            self.drain()
            shutil.rmtree(self.runtime_dir, ignore_errors=True)

    def drain(self) -> None:
        """Tell the workers the server is stopping (``drain.watch``), before the signal."""
        if self.drain_pipe is not None:
            self.drain_pipe.announce()

    def stop(self, timeout: float = WORKERS_KILL_TIMEOUT + 10.0) -> int:
        """Drain, SIGTERM after ``drain_grace_s`` (granian waits for open requests and stops
        its workers, killing any that hang), then ``kill`` after ``timeout``."""
        if self.process.poll() is None:
            self.drain()
            if self.drain_grace_s > 0:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    self.process.wait(self.drain_grace_s)
            self.process.terminate()
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill()
        return self.wait()

    def kill(self) -> None:
        """SIGKILL granian and its workers at once: the child leads a session of its own, so
        its process group is granian and everything it started."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)


def start_server(
    target: str | Callable[[], Any],
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    workers: int = 1,
    factory: bool = False,
    log_level: str = "info",
    json_logs: bool = True,
    working_dir: Path | None = None,
    log_file: Path | None = None,
    backlog: int | None = None,
    backpressure: int | None = None,
    workers_kill_timeout: int = WORKERS_KILL_TIMEOUT,
    drain_grace_s: float = 0.0,
    runtime_mode: str | None = None,
) -> Server:
    """Start granian serving ``target`` (``"pkg.module:app"``, or a factory) without waiting.

    ``backlog`` is the listen queue, ``backpressure`` the requests one worker serves at once
    (granian's default, backlog / workers, is small for servers whose clients each keep a
    connection open, such as a fleet of polling agents). ``workers_kill_timeout`` bounds how
    long a worker may take to stop on SIGTERM before granian kills it; ``drain_grace_s`` is how
    long the workers have between the drain announcement and the signal (``DRAIN_GRACE_S`` for
    an app that watches it). ``runtime_mode`` is granian's Rust runtime per worker, ``st`` or
    ``mt`` (None: granian's choice, ``mt`` for ASGI); ``GRANIAN_RUNTIME_MODE`` in the
    environment overrides it (decisions/0017)."""
    path, is_factory = import_path(target)
    runtime = Path(tempfile.mkdtemp(prefix="platformkit-serve-"))
    log_config = runtime / "logging.json"
    log_config.write_text(json.dumps(logging_config(log_level, json=json_logs)))
    drain = DrainPipe()
    env = dict(os.environ) | {DRAIN_ENV: drain.env_value}
    if workers > 1 and MULTIPROC_ENV not in env:
        (runtime / "metrics").mkdir()
        env[MULTIPROC_ENV] = str(runtime / "metrics")
    command = [
        sys.executable,
        "-m",
        "granian",
        "--interface",
        "asgi",
        "--host",
        host,
        "--port",
        str(port),
        "--workers",
        str(workers),
        "--log-level",
        log_level,
        "--log-config",
        str(log_config),
        "--no-access-log",
        "--workers-kill-timeout",
        str(workers_kill_timeout),
    ]
    if backlog is not None:
        command += ["--backlog", str(backlog)]
    if backpressure is not None:
        command += ["--backpressure", str(backpressure)]
    if runtime_mode is not None and RUNTIME_MODE_ENV not in env:
        command += ["--runtime-mode", runtime_mode]
    if factory or is_factory:
        command.append("--factory")
    if working_dir is not None:
        command += ["--working-dir", str(working_dir)]
    command.append(path)
    output = open(log_file, "ab") if log_file is not None else None  # noqa: SIM115 - the child owns it
    try:
        # A session of its own: a terminal's Ctrl-C reaches only us, and we forward it once.
        process = subprocess.Popen(  # noqa: S603 - fixed argv, no shell
            command,
            env=env,
            stdout=output,
            stderr=subprocess.STDOUT if output else None,
            start_new_session=True,
            preexec_fn=child_preexec(),
            pass_fds=(drain.read_fd,),
        )
    except BaseException:
        drain.announce()
        raise
    finally:
        drain.started()
        if output is not None:
            output.close()
    return Server(process, runtime, host, port, drain, drain_grace_s)


PR_SET_PDEATHSIG = 1  # prctl(2) option, Linux


def child_preexec() -> Callable[[], None] | None:
    """The ``preexec_fn`` of a server child: on Linux it ends when this process ends."""
    return _die_with_parent(os.getpid()) if sys.platform == "linux" else None


def _die_with_parent(parent: int) -> Callable[[], None]:
    """In the child before exec: end the server when the process that started it dies, even
    by SIGKILL, so a killed service never leaves an orphan serving on its port."""

    def hook() -> None:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
        if os.getppid() != parent:  # the parent died before the line above took effect
            os._exit(1)

    return hook


def serve(
    target: str | Callable[[], Any],
    host: str = "127.0.0.1",
    port: int = 8000,
    workers: int = 1,
    *,
    factory: bool = False,
    log_level: str = "info",
    json_logs: bool = True,
    proxy_listen: tuple[str, int] | None = None,
    proxy_trusted: Sequence[str] = (),
    backlog: int | None = None,
    backpressure: int | None = None,
    drain_grace_s: float = 0.0,
    runtime_mode: str | None = None,
    tls_front: TlsFrontConfig | None = None,
) -> int:
    """Serve until granian exits (SIGINT/SIGTERM to this process stop it); return its status.

    With ``proxy_listen``, a PROXY-protocol front (:mod:`platformkit.http.proxy_front`) also
    accepts connections there from the ``proxy_trusted`` networks and relays them to granian.
    With ``tls_front``, a TLS front (:mod:`platformkit.http.tls_front`) listens at its
    ``listen`` address and relays to granian (its ``upstream`` is set here).
    """
    server = start_server(
        target,
        host=host,
        port=port,
        workers=workers,
        factory=factory,
        log_level=log_level,
        json_logs=json_logs,
        backlog=backlog,
        backpressure=backpressure,
        drain_grace_s=drain_grace_s,
        runtime_mode=runtime_mode,
    )
    front = None
    if proxy_listen is not None:
        from platformkit.http.proxy_front import start_front, upstream_host

        front = start_front(proxy_listen, (upstream_host(host), port), proxy_trusted)
    tls = None
    if tls_front is not None:
        from dataclasses import replace

        from platformkit.http.proxy_front import upstream_host
        from platformkit.http.tls_front import start_tls_front

        tls = start_tls_front(replace(tls_front, upstream=(upstream_host(host), port)))

    # granian gets exactly one signal from us: its handler is not safe against a second one
    # arriving while it runs (the main process can hang on its own lock), and a second
    # SIGINT/SIGTERM here means "stop now", as a second Ctrl-C does elsewhere.
    signalled = False

    def forward(signum: int, frame: FrameType | None) -> None:
        nonlocal signalled
        if server.process.poll() is not None:
            return
        if signalled:
            server.kill()
            return
        signalled = True
        server.drain()
        if drain_grace_s <= 0:
            server.process.send_signal(signum)
            return
        later = threading.Timer(drain_grace_s, server.process.send_signal, args=(signum,))
        later.daemon = True
        later.start()

    previous = {sig: signal.signal(sig, forward) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        return server.wait()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        for child in (front, tls):
            if child is not None:
                child.terminate()
                child.wait()
        server.stop()
