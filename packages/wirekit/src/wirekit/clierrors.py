"""How every command line of the repository ends on an expected failure.

An expected failure prints exactly one line to standard error and exits non-zero::

    error: <code>: <message>

and only ``--debug`` (anywhere before a ``--``) shows the traceback instead. An exception is
expected when it carries a stable string ``code``: the error trees of the three systems do
(every ``ProblemError``), as do the agent side's errors and :class:`CliError`, which a command
raises for a failure of its own. A network failure (any ``OSError``: connection refused or
reset, DNS, TLS, timeout; urllib's ``URLError`` is one) is code ``network``. A command may name
further expected types with their codes (a database driver's connection error). Anything else
is a bug: the same one line with code ``internal`` and a hint to run again with ``--debug``.

The exit status is the exception's integer ``exit_code`` when it has one, 3 for a network
failure and 1 otherwise; usage errors keep the command-line library's own handling (exit 2).
"""

from __future__ import annotations

import sys
import urllib.error
from collections.abc import Callable, Mapping, Sequence
from typing import NoReturn

from wirekit.terminal import printable

__all__ = [
    "DEBUG_FLAG",
    "EXIT_FAILED",
    "EXIT_NETWORK",
    "CliError",
    "describe",
    "error_line",
    "fail",
    "run",
]

DEBUG_FLAG = "--debug"
EXIT_FAILED, EXIT_NETWORK = 1, 3


class CliError(Exception):
    """A command's own expected failure, with its stable ``code``."""

    def __init__(self, code: str, message: str, *, exit_code: int = EXIT_FAILED) -> None:
        super().__init__(message)
        self.code = code
        self.exit_code = exit_code


def _leaf(exc: BaseException) -> BaseException:
    """The one exception inside (nested) groups of one, as ``asyncio`` task groups raise."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return exc


def describe(
    exc: BaseException, known: Mapping[type[BaseException], str] | None = None
) -> tuple[str, str, int] | None:
    """``(code, message, exit status)`` of an expected failure, or None for a bug."""
    exc = _leaf(exc)
    code = getattr(exc, "code", None)
    status = getattr(exc, "exit_code", None)
    exit_code = status if isinstance(status, int) and status > 0 else EXIT_FAILED
    if isinstance(code, str) and code:
        return code, str(exc) or type(exc).__name__, exit_code
    for kind, known_code in (known or {}).items():
        if isinstance(exc, kind):
            return known_code, str(exc) or type(exc).__name__, exit_code
    if isinstance(exc, OSError):
        reason = exc.reason if isinstance(exc, urllib.error.URLError) else exc
        return "network", str(reason) or type(exc).__name__, EXIT_NETWORK
    return None


def error_line(code: str, message: str) -> str:
    """The one line: whitespace runs (newlines included) become one space, and control
    characters are escaped (a message may quote a server's or another user's text)."""
    return printable(f"error: {code}: {' '.join(message.split())}")


def run(
    app: Callable[..., object],
    argv: Sequence[str] | None = None,
    *,
    known: Mapping[type[BaseException], str] | None = None,
) -> NoReturn:
    """Run a command-line ``app`` (a Typer or Click application, called with ``args``) on
    ``argv`` (default ``sys.argv[1:]``) and exit as the module docstring says."""
    args = list(sys.argv[1:] if argv is None else argv)
    end = args.index("--") if "--" in args else len(args)
    debug = DEBUG_FLAG in args[:end]
    if debug:
        args = [a for a in args[:end] if a != DEBUG_FLAG] + args[end:]
    try:
        app(args=args)
    except SystemExit:
        raise
    except Exception as exc:
        if debug:
            raise
        fail(exc, known)
    raise SystemExit(0)


def fail(exc: BaseException, known: Mapping[type[BaseException], str] | None = None) -> NoReturn:
    """End the command on ``exc``: its one line on standard error, its exit status."""
    found = describe(exc, known)
    if found is None:
        code, message = "internal", f"{type(exc).__name__}: {exc} (run again with --debug)"
        exit_code = EXIT_FAILED
    else:
        code, message, exit_code = found
    sys.stderr.write(error_line(code, message) + "\n")
    sys.stderr.flush()
    raise SystemExit(exit_code) from None
