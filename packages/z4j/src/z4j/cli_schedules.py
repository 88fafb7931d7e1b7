"""``z4j schedule ...``: a project's schedules through a running brain's REST API.

The commands sign in like ``z4j task ...`` (``--email``/``Z4J_EMAIL``, the password from
``Z4J_PASSWORD`` or a prompt). A schedule is named by its id or its name. An error the brain
answers ends in ``error: <code>: <detail>``.
"""

from __future__ import annotations

import json
import uuid
from typing import Annotated, Any

import httpx
import typer
from platformkit.cli import CliError
from rich.table import Table

from z4j.cli_commands import Email, Password, Project, Url, api_error, console, signed_in

schedule_app = typer.Typer(
    help="Cron, interval and date schedules run by the brain's beat scheduler.",
    no_args_is_help=True,
)
Which = Annotated[str, typer.Argument(help="The schedule's id or name.")]
Kind = Annotated[str, typer.Option("--type", help="cron, interval or date.")]
Expression = Annotated[
    str,
    typer.Argument(help="cron: '*/5 * * * *'; interval: 30s, 5m, 1h30m; date: 2027-01-31T09:00."),
]


def _json(text: str | None, name: str) -> Any:
    try:
        return None if text is None else json.loads(text)
    except ValueError:
        raise CliError("usage", f"--{name} must be JSON") from None


def _resolve(http: httpx.Client, project: uuid.UUID, which: str) -> str:
    try:
        return str(uuid.UUID(which))
    except ValueError:
        pass
    listed = http.get(f"/projects/{project}/schedules")
    if listed.status_code != 200:
        raise api_error(listed)
    for schedule in listed.json():
        if schedule["name"] == which:
            return str(schedule["id"])
    raise CliError("schedule.not_found", f"no schedule named {which!r}")


def _show(schedule: dict[str, Any]) -> None:
    state = "enabled" if schedule["enabled"] else "disabled"
    console.print(
        f"{schedule['name']} ({schedule['id']}): {schedule['schedule_type']} "
        f"{schedule['expression']} [{schedule['timezone']}], {state}, "
        f"next run {schedule['next_run_at'] or '-'}",
        markup=False,
    )


@schedule_app.command("list")
def list_schedules(project: Project, url: Url, email: Email, password: Password) -> None:
    """The project's schedules with their next and last runs."""
    with signed_in(url, email, password) as http:
        answer = http.get(f"/projects/{project}/schedules")
        if answer.status_code != 200:
            raise api_error(answer)
    table = Table("name", "task", "when", "enabled", "next run", "last run", "runs", "last task")
    for s in answer.json():
        table.add_row(
            s["name"], s["task"], f"{s['schedule_type']} {s['expression']} ({s['timezone']})",
            "yes" if s["enabled"] else "no", s["next_run_at"] or "-", s["last_run_at"] or "-",
            str(s["total_run_count"]), s["last_task_state"] or "-",
        )  # fmt: skip
    console.print(table)


@schedule_app.command("create")
def create(
    project: Project,
    name: Annotated[str, typer.Argument(help="A name unique in the project.")],
    task: Annotated[str, typer.Argument(help="The Celery task name.")],
    expression: Expression,
    url: Url,
    email: Email,
    password: Password,
    kind: Kind = "cron",
    args: Annotated[str | None, typer.Option(help="Positional arguments, a JSON list.")] = None,
    kwargs: Annotated[str | None, typer.Option(help="Keyword arguments, a JSON object.")] = None,
    timezone: Annotated[
        str | None, typer.Option(help="IANA zone (default: the project's).")
    ] = None,
    queue: Annotated[str | None, typer.Option(help="Send the runs to this queue.")] = None,
    disabled: Annotated[bool, typer.Option(help="Create it disabled.")] = False,
    skip_if_running: Annotated[
        bool, typer.Option(help="Skip a due run while the last one has not finished.")
    ] = False,
) -> None:
    """Create a schedule."""
    body: dict[str, Any] = {"name": name, "task": task, "schedule_type": kind,
                            "expression": expression, "enabled": not disabled,
                            "skip_if_running": skip_if_running}  # fmt: skip
    extra = {"args": _json(args, "args"), "kwargs": _json(kwargs, "kwargs"),
             "timezone": timezone, "queue": queue}  # fmt: skip
    body |= {k: v for k, v in extra.items() if v is not None}
    with signed_in(url, email, password) as http:
        answer = http.post(f"/projects/{project}/schedules", json=body)
        if answer.status_code != 201:
            raise api_error(answer)
    _show(answer.json())


@schedule_app.command("update")
def update(
    project: Project,
    which: Which,
    url: Url,
    email: Email,
    password: Password,
    expression: Annotated[str | None, typer.Option(help="A new expression.")] = None,
    kind: Annotated[str | None, typer.Option("--type", help="cron, interval or date.")] = None,
    task: Annotated[str | None, typer.Option(help="A new task name.")] = None,
    args: Annotated[str | None, typer.Option(help="A JSON list.")] = None,
    kwargs: Annotated[str | None, typer.Option(help="A JSON object.")] = None,
    timezone: Annotated[str | None, typer.Option(help="An IANA zone.")] = None,
    queue: Annotated[str | None, typer.Option(help="A queue ('' for the default).")] = None,
    rename: Annotated[str | None, typer.Option(help="A new name.")] = None,
    skip_if_running: Annotated[
        bool | None,
        typer.Option(
            "--skip-if-running/--run-over", help="Skip due runs while the last one runs, or not."
        ),
    ] = None,
) -> None:
    """Change the given fields of a schedule."""
    change = {"expression": expression, "schedule_type": kind, "task": task,
              "args": _json(args, "args"), "kwargs": _json(kwargs, "kwargs"),
              "timezone": timezone, "queue": queue, "name": rename,
              "skip_if_running": skip_if_running}  # fmt: skip
    with signed_in(url, email, password) as http:
        sid = _resolve(http, project, which)
        answer = http.patch(
            f"/projects/{project}/schedules/{sid}",
            json={k: v for k, v in change.items() if v is not None},
        )
        if answer.status_code != 200:
            raise api_error(answer)
    _show(answer.json())


def _act(project: uuid.UUID, which: str, url: str, email: str, password: str, verb: str) -> None:
    with signed_in(url, email, password) as http:
        sid = _resolve(http, project, which)
        if verb == "delete":
            answer = http.delete(f"/projects/{project}/schedules/{sid}")
        else:
            answer = http.post(f"/projects/{project}/schedules/{sid}/{verb}")
        if answer.status_code not in (200, 202, 204):
            raise api_error(answer)
    if verb == "delete":
        console.print(f"deleted {which}", markup=False)
    else:
        _show(answer.json())


@schedule_app.command("enable")
def enable(project: Project, which: Which, url: Url, email: Email, password: Password) -> None:
    """Enable a schedule: it runs from its next time on."""
    _act(project, which, url, email, password, "enable")


@schedule_app.command("disable")
def disable(project: Project, which: Which, url: Url, email: Email, password: Password) -> None:
    """Disable a schedule: no more runs until it is enabled."""
    _act(project, which, url, email, password, "disable")


@schedule_app.command("run")
def run(project: Project, which: Which, url: Url, email: Email, password: Password) -> None:
    """Run a schedule now: the beat sends it at its next sync."""
    _act(project, which, url, email, password, "run")


@schedule_app.command("delete")
def delete(project: Project, which: Which, url: Url, email: Email, password: Password) -> None:
    """Delete a schedule."""
    _act(project, which, url, email, password, "delete")
