"""The embedded server: idempotent start, clean stop, data kept, configured URL wins."""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from platformkit.db.embedded import SYSTEM_USER, EmbeddedPostgres, EmbeddedPostgresError
from platformkit.db.server import OUTLIVES_COMMAND, admin_url_for
from platformkit.testing.services import free_port


@pytest.fixture
def tmp_path() -> Iterator[Path]:
    """A directory outside pytest's temporary root: a test worker that starts sets that root to
    0700, which cuts the server's account off its data directory, and a ``pg_ctl`` waiting for
    the server to come up then waits for a file it can no longer reach."""
    root = Path(tempfile.mkdtemp(prefix="pk-embedded-test-"))
    yield root
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def server(tmp_path: Path) -> Iterator[EmbeddedPostgres]:
    srv = EmbeddedPostgres(data_dir=tmp_path / "pg", port=free_port(), fast=True)
    yield srv
    srv.stop()


def test_start_is_idempotent_and_data_survives_restart(server: EmbeddedPostgres) -> None:
    url = server.start()
    assert url == f"postgresql://postgres@127.0.0.1:{server.port}/postgres"
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE TABLE kept (v int)")
        conn.execute("INSERT INTO kept VALUES (42)")
    pid = server._running_pid()
    # A second manager (another process, or a different configured port) reuses the running one.
    again = EmbeddedPostgres(data_dir=server.data_dir, port=1)
    assert again.start() == url
    assert server._running_pid() == pid

    server.stop()
    assert not server.is_running()
    server.stop()  # stopping a stopped server is a no-op
    server.start()
    with psycopg.connect(url) as conn:
        assert conn.execute("SELECT v FROM kept").fetchone() == (42,)


def test_listens_on_tcp_and_unix_socket(server: EmbeddedPostgres) -> None:
    server.start()
    sockets = list(server.socket_dir.glob(".s.PGSQL.*"))
    assert sockets, "no unix socket"
    with psycopg.connect(
        host=str(server.socket_dir), port=server.port, user="postgres", dbname="postgres"
    ) as conn:
        assert conn.execute("SELECT 1").fetchone() == (1,)
    with psycopg.connect(server.url()) as conn:
        row = conn.execute("SELECT inet_server_addr()::text").fetchone()
        assert row is not None
        assert row[0].startswith("127.0.0.1")


def test_is_configured_for_sustained_writes(server: EmbeddedPostgres) -> None:
    with psycopg.connect(server.start(), autocommit=True) as conn:
        settings = conn.execute(
            "SELECT current_setting('max_wal_size'), current_setting('checkpoint_timeout'),"
            " current_setting('shared_buffers')"
        ).fetchone()
    assert settings == ("4GB", "15min", "256MB")


def test_configured_url_starts_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PLATFORMKIT_PG_DATA", str(tmp_path / "never"))
    url = "postgresql://someone@db.invalid:5432/app"
    assert admin_url_for(url, "app") == url
    assert not (tmp_path / "never").exists()


def test_embedded_server_says_where_it_runs_and_that_it_stays(
    server: EmbeddedPostgres, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PLATFORMKIT_PG_DATA", str(server.data_dir))
    monkeypatch.setenv("PLATFORMKIT_PG_PORT", str(server.port))
    said: list[str] = []
    url = admin_url_for(None, "told", said.append)
    assert url == f"postgresql://postgres@127.0.0.1:{server.port}/told"
    assert said == [f"embedded PostgreSQL at {url} (data {server.data_dir}); {OUTLIVES_COMMAND}"]
    assert "stack down" in OUTLIVES_COMMAND
    with psycopg.connect(url) as conn:  # the database was created
        assert conn.execute("SELECT current_database()").fetchone() == ("told",)
    said.clear()
    assert admin_url_for("postgresql://someone@db.invalid:5432/app", "app", said.append)
    assert said == []  # a configured server is not ours to mention


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to switch to an unprivileged user")
def test_works_as_a_normal_user(tmp_path: Path) -> None:
    # Run a whole start/stop cycle as an unprivileged account, as a developer would.
    EmbeddedPostgres(data_dir=tmp_path / "warmup", port=free_port()).start()  # creates the user
    EmbeddedPostgres(data_dir=tmp_path / "warmup").stop()
    entry = pwd.getpwnam(SYSTEM_USER)
    home = tmp_path / "home"
    home.mkdir()
    os.chown(home, entry.pw_uid, entry.pw_gid)
    # The account must reach the interpreter and the temp dir; grant search (o+x) only, as the
    # manager itself does for its data dir under root's home.
    python = Path(sys.executable).resolve()
    for parent in [tmp_path, *tmp_path.parents, *python.parents]:
        parent.chmod(parent.stat().st_mode | 0o001)
    port = free_port()
    script = (
        "from platformkit.db.embedded import EmbeddedPostgres as E;import psycopg,pathlib;"
        f"s=E(data_dir=pathlib.Path('{home}/pg'),port={port});u=s.start();"
        "psycopg.connect(u).execute('select 1');s.stop();print('ok')"
    )
    env = {"HOME": str(home), "PATH": os.environ["PATH"], "XDG_RUNTIME_DIR": str(home)}
    out = subprocess.run(
        [sys.executable, "-c", script],
        user=entry.pw_uid,
        group=entry.pw_gid,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"


def test_long_data_dir_puts_the_socket_where_the_server_can_reach_it(tmp_path: Path) -> None:
    deep = tmp_path / ("d" * 60) / ("e" * 60) / "pg"
    deep.parent.mkdir(parents=True)
    server = EmbeddedPostgres(data_dir=deep, port=free_port(), fast=True)
    try:
        assert server.socket_dir != server.data_dir
        server.start()
        assert list(server.socket_dir.glob(".s.PGSQL.*"))
    finally:
        server.stop()


def test_another_server_on_the_port_is_never_joined(
    server: EmbeddedPostgres, tmp_path: Path
) -> None:
    """Another PostgreSQL (here another embedded cluster) answering on the port is an error
    naming the port, never a server to use; a plain listener is refused the same way."""
    server.start()
    other = EmbeddedPostgres(data_dir=tmp_path / "other", port=server.port, fast=True)
    with pytest.raises(EmbeddedPostgresError, match=rf"127\.0\.0\.1:{server.port}, not the"):
        other.start()
    assert not other.is_running()
    with socket.create_server(("127.0.0.1", 0)) as listener:
        squatted = EmbeddedPostgres(
            data_dir=tmp_path / "third", port=listener.getsockname()[1], fast=True
        )
        with pytest.raises(EmbeddedPostgresError, match="something else listens"):
            squatted.start()


def test_a_server_that_serves_another_data_dir_is_not_ours(
    server: EmbeddedPostgres, tmp_path: Path
) -> None:
    """A stale postmaster.pid whose process id was reused, naming the port another cluster
    listens on: the server is asked for its data directory and refused."""
    server.start()
    other = EmbeddedPostgres(data_dir=tmp_path / "other", port=free_port(), fast=True)
    other.start()
    other.stop()
    lines = [str(os.getpid()), str(other.data_dir), "0", str(server.port)]
    (other.data_dir / "postmaster.pid").write_text("\n".join(lines) + "\n")
    with pytest.raises(EmbeddedPostgresError, match="a PostgreSQL serving"):
        other.start(timeout=20)
    (other.data_dir / "postmaster.pid").unlink()
