"""The pytest plugin runs a session on its own settings: the systems' variables of the shell
that started it are gone, the test knobs (``PLATFORMKIT_TEST_*``) stay."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

INNER = """
import os

def test_the_environment_holds_no_system_settings():
    assert "AGENTBUS_DATABASE_URL" not in os.environ
    assert "Z4J_DATABASE_URL" not in os.environ
    assert "STRATAPLANE_PORT" not in os.environ
    assert "PLATFORMKIT_NATS_URL" not in os.environ
    assert os.environ["PLATFORMKIT_TEST_MARK"] == "kept"
    assert os.environ["OTHER_SETTING"] == "kept"
"""


def test_a_session_starts_without_the_shells_system_settings(tmp_path: Path) -> None:
    (tmp_path / "test_inner.py").write_text(INNER)
    env = {
        **os.environ,
        "AGENTBUS_DATABASE_URL": "postgresql://deployment.example/agentbus",
        "Z4J_DATABASE_URL": "postgresql://deployment.example/z4j",
        "STRATAPLANE_PORT": "1",
        "PLATFORMKIT_NATS_URL": "nats://deployment.example:4222",
        "PLATFORMKIT_TEST_MARK": "kept",
        "OTHER_SETTING": "kept",
    }
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout + run.stderr
