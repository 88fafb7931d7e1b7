"""wirekit.clierrors: which failures are expected, their one line and exit status."""

from __future__ import annotations

import sys
import urllib.error
from collections.abc import Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st
from wirekit.clierrors import CliError, describe, error_line, run


class Coded(Exception):
    code = "thing.taken"


def app_raising(exc: BaseException) -> Callable[..., object]:
    def app(args: list[str]) -> object:
        raise exc

    return app


@given(st.text())
def test_the_error_line_is_always_one_line(message: str) -> None:
    line = error_line("code", message)
    assert line.startswith("error: code: ")
    assert len(line.splitlines()) == 1


def test_what_is_expected() -> None:
    assert describe(Coded("Alice is taken")) == ("thing.taken", "Alice is taken", 1)
    assert describe(CliError("x.y", "no", exit_code=5)) == ("x.y", "no", 5)
    refused = urllib.error.URLError(ConnectionRefusedError(111, "Connection refused"))
    assert describe(refused) == ("network", "[Errno 111] Connection refused", 3)
    assert describe(ExceptionGroup("g", [Coded("one")])) == ("thing.taken", "one", 1)
    assert describe(KeyError("bug")) is None
    assert describe(LookupError("db down"), {LookupError: "db.down"}) == ("db.down", "db down", 1)


def test_run_prints_one_line_and_exits(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as ended:
        run(app_raising(Coded("Alice\nis taken")), [])
    assert ended.value.code == 1
    assert capsys.readouterr().err == "error: thing.taken: Alice is taken\n"
    with pytest.raises(SystemExit) as ended:
        run(app_raising(KeyError("k")), [])
    assert capsys.readouterr().err.startswith("error: internal: KeyError: 'k' (run again with")


def test_debug_shows_the_exception_and_is_not_passed_on() -> None:
    seen: list[list[str]] = []

    def app(args: list[str]) -> object:
        seen.append(args)
        raise Coded("x")

    with pytest.raises(Coded):
        run(app, ["send", "--debug", "--", "--debug"])
    assert seen == [["send", "--", "--debug"]]
    assert sys.argv  # untouched
