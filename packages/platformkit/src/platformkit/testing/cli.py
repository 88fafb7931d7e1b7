"""A check for Typer command-line apps: help texts that rich, which renders Typer's help,
would print differently from how they were written. Rich reads square brackets as markup,
so ``"Listen port [default: 7700]."`` prints as ``"Listen port ."``; write ``(default: ...)``,
or escape the bracket as ``\\[``. A command's summary, the first paragraph of its help, is
printed in its group's list with its line breaks kept, so it must be one line."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import typer
from rich.errors import MarkupError
from rich.markup import render


def _texts(command: Any, path: str) -> Iterator[tuple[str, str, bool]]:
    """(where, text, whether it is a command's) of a command, its parameters and its
    subcommands (Typer's groups are click groups by shape, not by class)."""
    yield path, command.help or "", True
    for param in command.params:
        yield f"{path} {param.name}", getattr(param, "help", None) or "", False
    for name, sub in (getattr(command, "commands", None) or {}).items():
        yield from _texts(sub, f"{path} {name}")


def mangled_help(app: typer.Typer) -> list[str]:
    """``"<command path> [<param>]: <text>"`` for every help text of ``app`` that rich would
    not print as written."""
    found = []
    for where, text, of_command in _texts(typer.main.get_command(app), "app"):
        if not text:
            continue
        try:
            printed = render(text).plain
        except MarkupError:
            printed = None
        broken_summary = of_command and "\n" in text.split("\n\n", 1)[0]
        if printed != text.replace("\\[", "[") or broken_summary:
            found.append(f"{where}: {text!r}")
    return found
