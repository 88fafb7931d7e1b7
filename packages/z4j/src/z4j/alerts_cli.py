"""``z4j alerts ...``: list, create, enable, disable and delete a project's alert rules through
a running brain's REST API, signed in like the other remote commands (``--email``/``Z4J_EMAIL``,
password from ``Z4J_PASSWORD`` or a prompt)."""

from __future__ import annotations

import uuid
from typing import Annotated, Any

import httpx
import typer
from platformkit.cli import Console
from rich.markup import escape
from rich.table import Table

from z4j.cli_commands import Email, Password, Project, Url, api_error, signed_in
from z4j.domain.alerts import UNIT, Kind

console = Console()
app = typer.Typer(help="Alert rules: what is watched and who is told.", no_args_is_help=True)
Rule = Annotated[uuid.UUID, typer.Argument(help="The rule's id (see `z4j alerts list`).")]


def _expect(answer: httpx.Response, status: int) -> Any:
    if answer.status_code != status:
        raise api_error(answer)
    return answer.json() if answer.content else None


@app.command("list")
def list_rules(project: Project, url: Url, email: Email, password: Password) -> None:
    """The rules with their state, then the latest firings."""
    with signed_in(url, email, password) as http:
        got = _expect(http.get(f"/projects/{project}/alerts"), 200)
    table = Table("id", "name", "fires when", "scope", "state")
    for r in got["rules"]:
        scope = ", ".join(f"{k} {r[k]}" for k in ("task_name", "queue", "agent_name") if r[k])
        state = "firing" if r["firing_since"] else ("ok" if r["enabled"] else "disabled")
        table.add_row(
            r["id"], escape(r["name"]), f"{r['kind']} > {r['threshold']} {UNIT[Kind(r['kind'])]}",
            escape(scope or "all"), state,
        )  # fmt: skip
    console.print(table)
    for f in got["firings"][:10]:
        end = f"resolved {f['resolved_at']}" if f["resolved_at"] else "firing"
        console.print(f"{f['started_at']}  {escape(f['rule_name'])}: {f['value']:.2f} ({end})")


@app.command("create")
def create(
    project: Project,
    url: Url,
    email: Email,
    password: Password,
    name: Annotated[str, typer.Option(help="A name unique in the project.")],
    kind: Annotated[Kind, typer.Option(help="What is compared with the threshold.")],
    threshold: Annotated[float, typer.Option(help="Percent, seconds or a count, by kind.")],
    window: Annotated[int, typer.Option(help="Window in seconds (60-604800).")] = 300,
    min_tasks: Annotated[int, typer.Option(help="Finished tasks a window needs.")] = 1,
    task_name: Annotated[str | None, typer.Option(help="Only this task name.")] = None,
    queue: Annotated[str | None, typer.Option(help="Only this queue.")] = None,
    agent_name: Annotated[str | None, typer.Option(help="Only this agent.")] = None,
    webhook: Annotated[str | None, typer.Option(help="POST notices here (JSON).")] = None,
    to: Annotated[list[str] | None, typer.Option("--to", help="Mail notices; repeat.")] = None,
) -> None:
    """Create a rule (admins and owners)."""
    body = {"name": name, "kind": kind.value, "threshold": threshold, "window_seconds": window,
            "min_tasks": min_tasks, "task_name": task_name, "queue": queue,
            "agent_name": agent_name, "webhook_url": webhook, "emails": to or []}  # fmt: skip
    with signed_in(url, email, password) as http:
        rule = _expect(http.post(f"/projects/{project}/alert-rules", json=body), 201)
    console.print(f"rule {rule['id']} ({escape(rule['name'])}) created")


def _switch(project: uuid.UUID, rule: uuid.UUID, url: str, email: str, password: str,
            enabled: bool) -> None:  # fmt: skip
    with signed_in(url, email, password) as http:
        path = f"/projects/{project}/alert-rules/{rule}"
        got = _expect(http.patch(path, json={"enabled": enabled}), 200)
    console.print(f"rule {got['id']} {'enabled' if enabled else 'disabled'}")


@app.command("enable")
def enable(project: Project, rule: Rule, url: Url, email: Email, password: Password) -> None:
    """Evaluate the rule again."""
    _switch(project, rule, url, email, password, True)


@app.command("disable")
def disable(project: Project, rule: Rule, url: Url, email: Email, password: Password) -> None:
    """Stop evaluating the rule; an open firing resolves."""
    _switch(project, rule, url, email, password, False)


@app.command("delete")
def delete(project: Project, rule: Rule, url: Url, email: Email, password: Password) -> None:
    """Delete the rule and its firings."""
    with signed_in(url, email, password) as http:
        _expect(http.delete(f"/projects/{project}/alert-rules/{rule}"), 204)
    console.print(f"rule {rule} deleted")
