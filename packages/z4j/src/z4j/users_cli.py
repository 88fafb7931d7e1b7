"""``z4j users list|disable|enable``: accounts from the command line, on the brain's database.

The commands open the brain's database like ``serve`` (Z4J_DATABASE_URL, Z4J_CONFIG_DIR) and
call the same actions as the API; their audit rows have no actor and ``details.via = "cli"``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Annotated, Any

import typer
from platformkit.cli import Console
from rich.table import Table

from z4j.brain import Brain
from z4j.settings import Settings

app = typer.Typer(help="Accounts: list them, disable or enable one.", no_args_is_help=True)
console = Console()
Who = Annotated[str, typer.Argument(help="The account's email or id.")]


def _with_brain[T](work: Callable[[Brain], Awaitable[T]]) -> T:
    from z4j.startup import open_brain, prepare

    async def run() -> T:
        brain = await open_brain(await prepare(Settings()), max_size=2)
        try:
            return await work(brain)
        finally:
            await brain.pool.close()

    return asyncio.run(run())


async def _list(brain: Brain) -> list[dict[str, Any]]:
    from platformkit.db.scope import transaction

    from z4j.store import users as user_store

    async with transaction(brain.pool) as conn:
        return await user_store.list_all(conn)


@app.command("list")
def list_users() -> None:
    """Every account: email, state, brain administrator, projects."""
    rows = _with_brain(_list)
    table = Table("email", "state", "admin", "projects", "id")
    for r in rows:
        state = "active" if r["is_active"] else "disabled"
        table.add_row(r["email"], state, "yes" if r["is_admin"] else "", str(r["projects"]),
                      str(r["id"]))  # fmt: skip
    console.print(table)


def _switch(who: str, active: bool) -> None:
    from z4j.actions.accounts import set_active_from_cli

    row = _with_brain(lambda brain: set_active_from_cli(brain, who, active))
    state = "enabled" if active else "disabled (sessions ended, API keys stopped)"
    console.print(f"{row['email']}: {state}")


@app.command("disable")
def disable(who: Who) -> None:
    """Disable an account: no sign-in; its sessions and API keys stop at once."""
    _switch(who, False)


@app.command("enable")
def enable(who: Who) -> None:
    """Enable a disabled account again."""
    _switch(who, True)
