"""``stack``: bring the whole stack up with embedded defaults, or take it down.

``stack up`` starts the embedded PostgreSQL (and NATS), prints how to reach them, then starts
every installed system's server (each registers itself under the ``platformkit.services`` entry
point group) and keeps them running until Ctrl-C, when it stops them in reverse order.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from importlib.metadata import entry_points
from typing import Annotated

import typer
from rich.console import Console

from platformkit.db.server import embedded_from_env
from platformkit.nats.embedded import EmbeddedNats

app = typer.Typer(help="Run the control planes together on one machine.", no_args_is_help=True)
console = Console()


def _service_commands() -> dict[str, list[str]]:
    """Each system registers ``name = module:function`` returning its serve command line."""
    found: dict[str, list[str]] = {}
    for ep in entry_points(group="platformkit.services"):
        found[ep.name] = list(ep.load()())
    return dict(sorted(found.items()))


@app.command()
def up(
    only: Annotated[list[str] | None, typer.Option(help="Start only these systems.")] = None,
    detach: Annotated[bool, typer.Option(help="Start the databases and return.")] = False,
) -> None:
    """Start embedded PostgreSQL and NATS, then every system's server, until Ctrl-C."""
    pg = embedded_from_env()
    with console.status("starting embedded PostgreSQL"):
        url = pg.start()
    console.print(f"[green]PostgreSQL[/] {url}  (socket dir {pg.socket_dir}, data {pg.data_dir})")
    console.print(f"  connect: {pg.psql_path} '{url}'")
    nats = EmbeddedNats()
    with console.status("starting embedded NATS JetStream"):
        nats_url = nats.start()
    console.print(f"[green]NATS JetStream[/] {nats_url}  (store {nats.store_dir})")
    if detach:
        console.print("Stop them with: uv run stack down")
        return
    services = {k: v for k, v in _service_commands().items() if not only or k in only}
    procs: list[tuple[str, subprocess.Popen[bytes]]] = []
    env = {**os.environ, "PLATFORMKIT_PG_PORT": str(pg.port), "PLATFORMKIT_NATS_URL": nats_url}
    for name, cmd in services.items():
        console.print(f"[green]{name}[/] starting: {' '.join(cmd)}")
        procs.append((name, subprocess.Popen(cmd, env=env)))  # noqa: S603 - registered commands
    if not procs:
        console.print("No system servers are installed yet; the databases stay up. Ctrl-C stops.")
    try:
        while True:
            for name, proc in procs:
                if proc.poll() is not None:
                    console.print(f"[red]{name} exited with {proc.returncode}[/]")
                    raise typer.Exit(1)
            time.sleep(0.5)
    except KeyboardInterrupt:
        console.print("stopping")
    finally:
        for _name, proc in reversed(procs):
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for _name, proc in reversed(procs):
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()


@app.command()
def down() -> None:
    """Stop the embedded NATS and PostgreSQL servers (data is kept)."""
    EmbeddedNats().stop()
    embedded_from_env().stop()
    console.print("stopped")


@app.command()
def status() -> None:
    """Say whether the embedded servers are running."""
    pg = embedded_from_env()
    nats = EmbeddedNats()
    console.print(f"PostgreSQL: {'running at ' + pg.url() if pg.is_running() else 'stopped'}")
    console.print(f"NATS: {'running at ' + nats.url if nats.running_pid() else 'stopped'}")


def main() -> None:
    app(sys.argv[1:])
