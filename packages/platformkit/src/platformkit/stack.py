"""``stack``: bring the whole stack up with embedded defaults, or take it down.

``stack up`` starts the embedded PostgreSQL (and NATS), prints how to reach them, then starts
every installed system's server (each registers itself under the ``platformkit.services`` entry
point group) and keeps them running until Ctrl-C, when it stops them in reverse order.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from importlib.metadata import entry_points
from typing import Annotated

import typer

from platformkit.cli import Console
from platformkit.cli import run as run_cli
from platformkit.db.server import embedded_from_env
from platformkit.http.serve import child_preexec
from platformkit.nats.embedded import nats_from_env

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
    nats = nats_from_env()
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
        # Each server gets its own process group, so stopping it reaches its workers too, and
        # ends when this process ends, however it ends (SIGKILL included).
        child = subprocess.Popen(  # noqa: S603 - the systems' own serve commands
            cmd, env=env, start_new_session=True, preexec_fn=child_preexec()
        )
        procs.append((name, child))
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
        _stop(procs)


def _stop(procs: list[tuple[str, subprocess.Popen[bytes]]], grace: float = 20.0) -> None:
    """SIGTERM every server's process group, then SIGKILL what is left after ``grace``."""
    for _name, proc in reversed(procs):
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    for name, proc in reversed(procs):
        try:
            proc.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            console.print(f"[red]{name} did not stop in time; killing it[/]")
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)


@app.command()
def down() -> None:
    """Stop the embedded NATS and PostgreSQL servers (data is kept)."""
    nats_from_env().stop()
    embedded_from_env().stop()
    console.print("stopped")


@app.command()
def status() -> None:
    """Say whether the embedded servers are running."""
    pg = embedded_from_env()
    nats = nats_from_env()
    console.print(f"PostgreSQL: {'running at ' + pg.url() if pg.is_running() else 'stopped'}")
    console.print(f"NATS: {'running at ' + nats.url if nats.running_pid() else 'stopped'}")


def main() -> None:
    run_cli(app)


if __name__ == "__main__":
    main()
