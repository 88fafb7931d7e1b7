"""``mangled_help`` finds the help texts rich would print differently from how they were
written."""

from __future__ import annotations

from typing import Annotated

import typer
from platformkit.testing.cli import mangled_help


def _app() -> typer.Typer:
    app = typer.Typer()
    sub = typer.Typer(help="Nested [bold]group[/bold].")

    @app.command()
    def serve(
        port: Annotated[int, typer.Option(help="Listen port [default: 7700].")] = 7700,
        host: Annotated[str, typer.Option(help="Listen address (default: 127.0.0.1).")] = "",
        pairs: Annotated[str, typer.Option(help="JSON \\[\\[a, b], ...].")] = "",
    ) -> None:
        """Serve."""

    @app.command()
    def check() -> None:
        """A summary that goes on
        to a second line."""

    @app.command()
    def fine() -> None:
        """One line.

        Then a paragraph
        of several."""

    @sub.command()
    def leaf(name: Annotated[str, typer.Option(help="NAME[:VERSION].")] = "") -> None:
        """Unclosed [/oops] tag."""

    app.add_typer(sub, name="group")
    return app


def test_swallowed_brackets_bad_markup_and_broken_summaries_are_found_and_the_rest_passes() -> None:
    assert mangled_help(_app()) == [
        "app serve port: 'Listen port [default: 7700].'",
        "app check: 'A summary that goes on\\nto a second line.'",
        "app group: 'Nested [bold]group[/bold].'",
        "app group leaf: 'Unclosed [/oops] tag.'",
    ]
