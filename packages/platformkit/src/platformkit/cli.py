"""The entry point of every server-side command line (``stack``, ``strataplane``, ``z4j``,
``agentbus-gateway``): SIGTERM and SIGHUP stop it like Ctrl-C, and an expected failure ends in
one line ``error: <code>: <message>`` (``wirekit.clierrors``), a database that cannot be reached
included; ``--debug`` shows the traceback instead. A command that catches such a failure early
(a check before anything runs) ends on it with :func:`fail`, the same one line. :class:`Console`
is the Rich console they print with: control characters in any text it renders are escaped
(``wirekit.terminal``), since names, messages and details come from other people."""

from __future__ import annotations

from collections.abc import Callable
from typing import NoReturn

import psycopg
import rich.console
from wirekit.clierrors import CliError, fail
from wirekit.clierrors import run as run_cli
from wirekit.terminal import PrintableText

from platformkit.stopping import stop_like_ctrl_c

__all__ = ["SERVER_FAILURES", "CliError", "Console", "fail", "run"]

SERVER_FAILURES: dict[type[BaseException], str] = {psycopg.OperationalError: "database.unavailable"}


class Console(PrintableText, rich.console.Console):
    """``rich.console.Console`` that shows control characters as escapes."""


def run(app: Callable[..., object]) -> NoReturn:
    stop_like_ctrl_c()
    run_cli(app, known=SERVER_FAILURES)
