"""``stop_like_ctrl_c``: SIGTERM and SIGHUP run a command's cleanup as Ctrl-C does, and a
signal the process was started ignoring stays ignored."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = """
import sys, time
from pathlib import Path
from platformkit.stopping import stop_like_ctrl_c

stop_like_ctrl_c()
try:
    print("ready", flush=True)
    time.sleep(60)
except KeyboardInterrupt:
    Path(sys.argv[1]).write_text("interrupted")
"""


def _start(marker: Path, ignore_hangup: bool = False) -> subprocess.Popen[str]:
    def dispose() -> None:
        # Set either way: a runner started under nohup passes SIGHUP on ignored, and one started
        # in the background by a shell without job control (`cmd &`) passes SIGINT on ignored.
        signal.signal(signal.SIGHUP, signal.SIG_IGN if ignore_hangup else signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.SIG_DFL)

    proc = subprocess.Popen(
        [sys.executable, "-c", SCRIPT, str(marker)],
        stdout=subprocess.PIPE,
        text=True,
        preexec_fn=dispose,
    )
    assert proc.stdout is not None
    assert proc.stdout.readline() == "ready\n"
    return proc


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT])
def test_a_stopping_signal_runs_the_cleanup(tmp_path: Path, sig: signal.Signals) -> None:
    marker = tmp_path / "marker"
    with _start(marker) as proc:
        proc.send_signal(sig)
        assert proc.wait(timeout=10) == 0
    assert marker.read_text() == "interrupted"


def test_an_ignored_hangup_stays_ignored(tmp_path: Path) -> None:
    marker = tmp_path / "marker"
    with _start(marker, ignore_hangup=True) as proc:
        proc.send_signal(signal.SIGHUP)
        with pytest.raises(subprocess.TimeoutExpired):
            proc.wait(timeout=0.5)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=10) == 0
    assert marker.read_text() == "interrupted"
