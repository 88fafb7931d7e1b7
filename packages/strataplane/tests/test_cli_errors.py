"""The real ``strataplane`` command on expected failures: one line ``error: <code>: <message>``
on stderr and a non-zero exit, the traceback only with ``--debug``."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from platformkit.testing.services import free_port

STRATAPLANE = str(Path(sys.executable).parent / "strataplane")
PASSWORD = "a long enough passphrase 42"


def strataplane(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [STRATAPLANE, *args],
        env={**os.environ, "STRATAPLANE_ADMIN_PASSWORD": PASSWORD, "COLUMNS": "200", **env},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_a_second_create_admin_is_one_line_and_a_traceback_only_with_debug(
    strataplane_database: str,
) -> None:
    args = ("create-admin", "--username", "root", "--database-url", strataplane_database)
    assert strataplane(*args).returncode == 0

    again = strataplane(*args)

    assert again.returncode == 1, again.stderr
    assert again.stderr.startswith("error: user.username_taken: "), again.stderr
    assert len(again.stderr.splitlines()) == 1, again.stderr
    debug = strataplane(*args, "--debug")
    assert debug.returncode == 1
    assert "Traceback" in debug.stderr
    assert "UsernameTaken" in debug.stderr


def test_a_server_that_is_down_is_a_network_error(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    env = {"STRATAPLANE_URL": url, "STRATAPLANE_TOKEN": "x" * 20}
    env["STRATAPLANE_CLI_CONFIG"] = str(tmp_path / "cli.json")

    down = strataplane("cs", "list", **env)

    assert down.returncode == 3, down.stderr
    assert down.stderr.startswith(f"error: network: cannot reach {url}/api/v1/"), down.stderr
    assert len(down.stderr.splitlines()) == 1, down.stderr
    assert "Traceback" not in down.stderr


def test_not_logged_in(tmp_path: Path) -> None:
    alone = strataplane("cs", "list", STRATAPLANE_CLI_CONFIG=str(tmp_path / "none.json"))
    assert alone.returncode == 1
    assert alone.stderr == "error: auth.not_logged_in: not logged in: run strataplane login\n"
