"""``z4j task|queue|worker ...``: commands to agents through a running brain's REST API.

They sign in with an account of the project (``--email``/``Z4J_EMAIL``, password from
``Z4J_PASSWORD`` or a prompt), issue the command, and follow it to its final status unless
``--no-wait``. An error the brain answers ends in ``error: <code>: <detail>``.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Annotated, Any

import httpx
import typer
from platformkit.cli import CliError, Console
from rich.progress import Progress

console = Console()
FINAL = ("succeeded", "failed", "timed_out")

task_app = typer.Typer(help="Retry, cancel or rate-limit tasks.", no_args_is_help=True)
queue_app = typer.Typer(help="Purge a queue.", no_args_is_help=True)
worker_app = typer.Typer(help="Resize or restart a worker's pool.", no_args_is_help=True)

Url = Annotated[str, typer.Option("--url", help="The brain's address.", envvar="Z4J_URL")]
Email = Annotated[str, typer.Option("--email", help="Sign in as.", envvar="Z4J_EMAIL")]
Password = Annotated[
    str,
    typer.Option(
        "--password", help="Or Z4J_PASSWORD.", envvar="Z4J_PASSWORD", prompt=True, hide_input=True
    ),
]
Wait = Annotated[
    bool, typer.Option("--wait/--no-wait", help="Follow the command to its final status.")
]
Project = Annotated[uuid.UUID, typer.Argument(help="Project id.")]


def api_error(answer: httpx.Response) -> CliError:
    """The brain's problem answer as the command's error: its code and detail."""
    try:
        body = answer.json()
    except ValueError:
        body = {}
    code = str(body.get("code") or f"http.{answer.status_code}")
    return CliError(code, str(body.get("detail") or body.get("title") or answer.reason_phrase))


@contextmanager
def signed_in(url: str, email: str, password: str) -> Iterator[httpx.Client]:
    """A client of the brain's REST API (``/api/v1``) at ``url``, signed in as ``email``."""
    with httpx.Client(base_url=f"{url.rstrip('/')}/api/v1", timeout=30) as http:
        login = http.post("/auth/login", json={"email": email, "password": password})
        if login.status_code != 200:
            raise api_error(login)
        yield http


def _issue(
    url: str, email: str, password: str, path: str, body: dict[str, Any], wait: bool
) -> None:
    with signed_in(url, email, password) as http:
        answer = http.post(path, json=body)
        if answer.status_code != 202:
            raise api_error(answer)
        command = answer.json()
        project = path.split("/")[2]
        console.print(f"command {command['id']} ({command['action']}): {command['status']}")
        if not wait:
            return
        deadline = time.monotonic() + command["timeout_seconds"] + 30
        with console.status(f"waiting for the agent ({command['action']})") as status:
            while command["status"] not in FINAL and time.monotonic() < deadline:
                time.sleep(0.5)
                got = http.get(f"/projects/{project}/commands/{command['id']}")
                if got.status_code != 200:
                    raise api_error(got)
                command = got.json()
                status.update(f"{command['action']}: {command['status']}")
    result = command.get("result") or {}
    console.print(f"{command['action']}: {command['status']}", result or "")
    if command["status"] != "succeeded":
        raise CliError(f"command.{command['status']}", str(command.get("error") or ""))


@task_app.command("retry")
def retry(
    project: Project,
    task: Annotated[uuid.UUID, typer.Argument(help="The task's brain id.")],
    url: Url,
    email: Email,
    password: Password,
    wait: Wait = True,
) -> None:
    """Run a task again with its original arguments (a new task, linked by retried_as)."""
    _issue(url, email, password, f"/projects/{project}/tasks/{task}/retry", {}, wait)


@task_app.command("cancel")
def cancel(
    project: Project,
    task: Annotated[uuid.UUID, typer.Argument(help="The task's brain id.")],
    url: Url,
    email: Email,
    password: Password,
    terminate: Annotated[bool, typer.Option(help="Stop it (SIGTERM) if it runs.")] = False,
    wait: Wait = True,
) -> None:
    """Revoke a task."""
    body = {"terminate": terminate}
    _issue(url, email, password, f"/projects/{project}/tasks/{task}/cancel", body, wait)


@task_app.command("rate-limit")
def rate_limit(
    project: Project,
    task_name: Annotated[str, typer.Argument(help="The task's name.")],
    rate: Annotated[str, typer.Argument(help="e.g. 10/m, 2/s; 0 lifts the limit.")],
    url: Url,
    email: Email,
    password: Password,
    worker: Annotated[str | None, typer.Option(help="One worker node (default: all).")] = None,
    wait: Wait = True,
) -> None:
    """Set the rate limit of a task name on the workers."""
    body: dict[str, Any] = {"task_name": task_name, "rate": rate, "worker": worker}
    _issue(url, email, password, f"/projects/{project}/rate-limits", body, wait)


@queue_app.command("purge")
def purge(
    project: Project,
    queue: Annotated[str, typer.Argument(help="The queue's name.")],
    url: Url,
    email: Email,
    password: Password,
    confirm: Annotated[str, typer.Option(help="The queue's name again.", prompt=True)],
    expected_depth: Annotated[
        int | None, typer.Option(help="Purge only if it still holds this many.")
    ] = None,
    wait: Wait = True,
) -> None:
    """Delete every message waiting in a queue."""
    body: dict[str, Any] = {"queue": queue, "confirm": confirm, "expected_depth": expected_depth}
    _issue(url, email, password, f"/projects/{project}/queues/purge", body, wait)


@worker_app.command("pool")
def pool(
    project: Project,
    worker: Annotated[str, typer.Argument(help="The worker node, e.g. celery@host.")],
    delta: Annotated[int, typer.Argument(help="Processes to add (> 0) or remove (< 0).")],
    url: Url,
    email: Email,
    password: Password,
    wait: Wait = True,
) -> None:
    """Grow or shrink a worker's pool."""
    body = {"worker": worker, "delta": delta}
    _issue(url, email, password, f"/projects/{project}/workers/pool", body, wait)


@worker_app.command("restart")
def restart(
    project: Project,
    worker: Annotated[str, typer.Argument(help="The worker node, e.g. celery@host.")],
    url: Url,
    email: Email,
    password: Password,
    wait: Wait = True,
) -> None:
    """Restart a worker's pool processes."""
    body = {"worker": worker}
    _issue(url, email, password, f"/projects/{project}/workers/restart", body, wait)


@task_app.command("bulk-retry")
def bulk_retry(
    project: Project,
    url: Url,
    email: Email,
    password: Password,
    state: Annotated[list[str] | None, typer.Option(help="Task state; repeat for several.")] = None,
    name: Annotated[str | None, typer.Option(help="Task name, or a prefix ending in *.")] = None,
    queue: Annotated[str | None, typer.Option(help="Queue.")] = None,
    since: Annotated[str | None, typer.Option(help="ISO 8601 time (created since).")] = None,
    until: Annotated[str | None, typer.Option(help="ISO 8601 time (created before).")] = None,
    maximum: Annotated[int, typer.Option("--max", help="Retry at most this many.")] = 100,
    yes: Annotated[bool, typer.Option("--yes", help="Do not ask after the count.")] = False,
    wait: Wait = True,
) -> None:
    """Retry every task the filters match (as the task list filters): the count first."""
    pairs = [("state", s) for s in state or []]
    pairs += [(k, v) for k, v in (("name", name), ("queue", queue), ("since", since),
                                  ("until", until)) if v]  # fmt: skip
    params = httpx.QueryParams(tuple(pairs))
    path = f"/projects/{project}/tasks/bulk-retry"
    with httpx.Client(base_url=f"{url.rstrip('/')}/api/v1", timeout=30) as http:
        login = http.post("/auth/login", json={"email": email, "password": password})
        if login.status_code != 200:
            raise api_error(login)
        preview = http.post(path, params=params, json={"max": maximum, "dry_run": True})
        if preview.status_code != 200:
            raise api_error(preview)
        count = preview.json()
        more = f" (more match; the newest {count['max']} only)" if count["more"] else ""
        console.print(f"{count['count']} tasks match{more}")
        if not count["count"]:
            return
        if not yes:
            typer.confirm(f"Retry {count['count']} tasks?", abort=True)
        started = http.post(path, params=params, json={"max": maximum})
        if started.status_code != 202:
            raise api_error(started)
        bulk = started.json()
        console.print(f"bulk retry {bulk['id']}: {bulk['total']} tasks")
        if not wait:
            return
        with Progress(console=console) as progress:
            bar = progress.add_task("retrying", total=bulk["total"])
            while bulk["status"] == "running":
                time.sleep(0.5)
                got = http.get(f"/projects/{project}/bulk-retries/{bulk['id']}")
                if got.status_code != 200:
                    raise api_error(got)
                bulk = got.json()
                finished = sum(n for s, n in bulk["commands"].items() if s in FINAL)
                progress.update(bar, completed=finished + bulk["skipped"])
    console.print(f"bulk retry {bulk['status']}: {bulk['commands']}, skipped {bulk['skipped']}")
    if any(s != "succeeded" for s in bulk["commands"]):
        raise CliError("bulk_retry.incomplete", "some retries did not succeed")
