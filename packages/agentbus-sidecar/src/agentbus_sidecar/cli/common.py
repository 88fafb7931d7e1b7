"""Shared CLI plumbing: paths, output (human or ``--json``), errors to exit codes.

Exit codes are stable, so scripts can branch on them:

    0  done (a send that was queued for later also counts as done)
    1  a check or operation failed (doctor found a failure, a send was refused for good)
    2  bad input (usage, malformed address, envelope the gateway would refuse)
    3  the gateway cannot be used as this agent: unreachable (a send stays queued), or it
       refused the integration token, unknown, revoked or expired (nothing stays queued)
    4  the gateway refused the request (an AB- code is printed)
    5  configuration: credentials missing, insecure or incomplete; store unusable
    6  a wait ran out of time (``task wait``, ``wait-reply``)
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Callable, Coroutine, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import typer
from wirekit.clierrors import error_line

from agentbus_sidecar.errors import (
    ConfigError,
    EnvelopeError,
    GatewayError,
    GatewayUnreachable,
    SidecarError,
    StoreError,
)

if TYPE_CHECKING:
    from rich.console import Console

__all__ = [
    "EXIT_CONFIG",
    "EXIT_FAILED",
    "EXIT_INPUT",
    "EXIT_REJECTED",
    "EXIT_TIMED_OUT",
    "EXIT_UNREACHABLE",
    "Attach",
    "JsonFlag",
    "Paths",
    "WaitTimeout",
    "console",
    "emit",
    "fail",
    "guarded",
    "paths",
    "read_text_arg",
    "run",
]

EXIT_FAILED, EXIT_INPUT, EXIT_UNREACHABLE, EXIT_REJECTED, EXIT_CONFIG = 1, 2, 3, 4, 5
EXIT_TIMED_OUT = 6

JsonFlag = Annotated[bool, typer.Option("--json", help="Print one JSON object for machines.")]
WaitTimeout = Annotated[int, typer.Option("--timeout", min=1, help="Seconds to wait at most.")]
Attach = Annotated[
    list[Path] | None,
    typer.Option(
        "--attach",
        exists=True,
        dir_okay=False,
        help="A file to attach (repeatable); uploaded first, so this needs the gateway.",
    ),
]


@dataclass(frozen=True)
class Paths:
    credentials: Path
    state_dir: Path | None


def paths(ctx: typer.Context) -> Paths:
    value = ctx.find_root().obj
    assert isinstance(value, Paths)
    return value


def console(*, stderr: bool = False) -> Console:
    """Rich output for people; imported here, since ``--json`` runs never need it. Every string
    it renders is made printable first (``wirekit.terminal``)."""
    from rich.console import Console as RichConsole
    from wirekit.terminal import PrintableText

    class Console(PrintableText, RichConsole):
        """Other agents' text with its control characters escaped (no screen clears)."""

    return Console(stderr=stderr, highlight=False, soft_wrap=True)


def emit(as_json: bool, data: Any, human: Callable[[Console], None]) -> None:
    if as_json:
        sys.stdout.write(json.dumps(data, sort_keys=True, default=str) + "\n")
    else:
        human(console())


def fail(
    message: str,
    exit_code: int,
    as_json: bool,
    *,
    code: str,
    human: str | None = None,
    extra: dict[str, Any] | None = None,
) -> NoReturn:
    """End the command: one JSON object on stdout with ``--json``, else the one line
    ``error: <code>: <message>`` on stderr (``human`` when the line should say it shorter)."""
    if as_json:
        error = {"message": message, "exit_code": exit_code, "code": code, **(extra or {})}
        sys.stdout.write(json.dumps({"error": error}, sort_keys=True) + "\n")
    else:
        sys.stderr.write(error_line(code, human or message) + "\n")
    raise typer.Exit(exit_code)


@contextmanager
def guarded(as_json: bool) -> Iterator[None]:
    """Turn the sidecar's exceptions into a message, a stable code and an exit code."""
    try:
        yield
    except GatewayUnreachable as exc:
        fail(str(exc), EXIT_UNREACHABLE, as_json, code=GatewayUnreachable.code)
    except GatewayError as exc:
        extra = {"name": exc.name, "status": exc.status, "detail": exc.detail}
        code = exc.code or f"HTTP-{exc.status}"
        short = exc.detail or exc.name or f"HTTP {exc.status}"
        if exc.token_refused:
            message = f"{exc.code}: {exc.detail}"
            fail(message, EXIT_UNREACHABLE, as_json, code=code, human=short, extra=extra)
        message = f"the gateway refused: {exc}"
        fail(message, EXIT_REJECTED, as_json, code=code, human=short, extra=extra)
    except (ConfigError, StoreError) as exc:
        fail(str(exc), EXIT_CONFIG, as_json, code=exc.code or "failed")
    except EnvelopeError as exc:
        fail(str(exc), EXIT_INPUT, as_json, code=exc.code or "failed")
    except SidecarError as exc:
        fail(str(exc), EXIT_FAILED, as_json, code=exc.code or "failed")


def run[T](coro: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(coro)


def read_text_arg(value: str | None) -> str:
    """A text argument, or standard input when it is ``-`` or missing."""
    if value is None or value == "-":
        text = sys.stdin.read()
        if not text.strip():
            raise typer.BadParameter("no text given (argument or standard input)")
        return text
    return value
