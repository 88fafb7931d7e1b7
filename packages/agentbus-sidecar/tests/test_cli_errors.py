"""The real ``agentbus`` command on expected failures: one line ``error: <code>: <message>``
on stderr, its stable exit code, the traceback only with ``--debug``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

AGENTBUS = str(Path(sys.executable).parent / "agentbus")


def agentbus(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "AGENTBUS_CREDENTIALS": str(tmp_path / "credentials.json"),
           "AGENTBUS_STATE_DIR": str(tmp_path / "state"), "COLUMNS": "200"}  # fmt: skip
    return subprocess.run(
        [AGENTBUS, *args], env=env, capture_output=True, text=True, timeout=120, check=False
    )


def test_missing_credentials_is_one_line_with_its_code(tmp_path: Path) -> None:
    missing = agentbus(tmp_path, "inbox")

    assert missing.returncode == 5, missing.stderr
    assert missing.stderr.startswith("error: config: no credentials at "), missing.stderr
    assert len(missing.stderr.splitlines()) == 1
    as_json = json.loads(agentbus(tmp_path, "inbox", "--json").stdout)["error"]
    assert (as_json["code"], as_json["exit_code"]) == ("config", 5)


def test_unreadable_credentials_are_one_line_too(tmp_path: Path) -> None:
    (tmp_path / "credentials.json").write_text("{not json")
    (tmp_path / "credentials.json").chmod(0o600)
    plain = agentbus(tmp_path, "keys", "list")
    assert plain.returncode != 0
    assert "Traceback" not in plain.stderr
    assert plain.stderr.startswith("error: "), plain.stderr
    assert len(plain.stderr.splitlines()) == 1, plain.stderr
