"""``strataplane login``, ``strataplane cs ...`` and ``strataplane spec ...``: the change-set
workflow and the spec's history from a terminal, over the HTTP API.

``login`` exchanges a username and password for an API token of the chosen tenant and keeps it
with the server URL in a file of mode 0600 (``STRATAPLANE_CLI_CONFIG``, else the user config
directory); ``STRATAPLANE_URL`` and ``STRATAPLANE_TOKEN`` override it. Commands that act on a
change set's content first read it and send the digest they saw in ``If-Match`` (or the one
given with ``--if-match``), so a concurrent change is refused rather than overwritten.
"""

from __future__ import annotations

import json
import os
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer
from platformkit.cli import Console
from rich.markup import escape
from rich.progress import BarColumn, Progress, SpinnerColumn, TaskProgressColumn, TextColumn
from rich.table import Table
from wirekit.clierrors import EXIT_NETWORK, CliError, error_line

out = Console(soft_wrap=True, highlight=False)
err = Console(stderr=True, soft_wrap=True, highlight=False)


def e(value: object) -> str:
    """Text from the server, shown as is (never read as Rich markup)."""
    return escape(str(value))


@dataclass(frozen=True)
class Reply:
    status: int
    headers: Mapping[str, str]  # lower-case names
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body) if self.body else None


Transport = Callable[[str, str, bytes | None, dict[str, str]], Reply]


def urllib_transport(method: str, url: str, body: bytes | None, headers: dict[str, str]) -> Reply:
    if urllib.parse.urlsplit(url).scheme not in ("http", "https"):
        raise typer.BadParameter(f"not an http(s) URL: {url}")
    request = urllib.request.Request(url, data=body, method=method, headers=headers)  # noqa: S310 - scheme checked above
    try:
        with urllib.request.urlopen(request, timeout=120) as response:  # noqa: S310 - scheme checked above
            return Reply(response.status, _lower(response.headers.items()), response.read())
    except urllib.error.HTTPError as exc:
        return Reply(exc.code, _lower(exc.headers.items()), exc.read())
    except OSError as exc:  # URLError included: refused, DNS, TLS, timeout
        reason = exc.reason if isinstance(exc, urllib.error.URLError) else exc
        raise CliError("network", f"cannot reach {url}: {reason}", exit_code=EXIT_NETWORK) from exc


def _lower(items: Any) -> dict[str, str]:
    return {str(k).lower(): str(v) for k, v in items}


def config_path() -> Path:
    configured = os.environ.get("STRATAPLANE_CLI_CONFIG")
    if configured:
        return Path(configured)
    from platformdirs import user_config_dir

    return Path(user_config_dir("strataplane")) / "cli.json"


class Client:
    def __init__(self, url: str, token: str | None, transport: Transport) -> None:
        self.url, self.token, self.transport = url.rstrip("/"), token, transport

    def call(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        headers: Mapping[str, str] | None = None,
        params: Mapping[str, Any] | None = None,
        expect: tuple[int, ...] = (200, 201, 202, 204),
    ) -> Reply:
        sent = {"Accept": "application/json", **(headers or {})}
        if self.token:
            sent["Authorization"] = f"Bearer {self.token}"
        data = None
        if body is not None:
            data, sent["Content-Type"] = json.dumps(body).encode(), "application/json"
        query = f"?{urllib.parse.urlencode(params, doseq=True)}" if params else ""
        reply = self.transport(method, f"{self.url}/api/v1{path}{query}", data, sent)
        if reply.status not in expect:
            fail(reply)
        return reply

    def get(self, route: str, **params: Any) -> Any:
        given = {k: v for k, v in params.items() if v is not None}
        return self.call("GET", route, params=given).json()


def fail(reply: Reply) -> NoReturn:
    """The server's refusal as the one line ``error: <code>: <detail>`` (then the problem's
    diagnostics or conflicts, one per line), exit 1."""
    try:
        problem = reply.json()
    except ValueError:
        problem = None
    if not isinstance(problem, dict):
        raise CliError(f"HTTP-{reply.status}", f"the server answered HTTP {reply.status}")
    code = str(problem.get("code") or f"HTTP-{reply.status}")
    err.out(error_line(code, str(problem.get("detail") or problem.get("title"))), highlight=False)
    for diagnostic in problem.get("diagnostics", []):
        err.print(f"  {diagnostic['code']} {e(diagnostic['path'])}: {e(diagnostic['message'])}")
    for conflict in problem.get("conflicts", []):
        err.print(f"  conflict {e(conflict['path'])} (resolve with --ours, --theirs or --use)")
    raise typer.Exit(1)


def client(ctx: typer.Context) -> Client:
    """The server and token from the environment or the login file; ``ctx.obj`` may hold the
    transport (tests pass one that reaches the app in process)."""
    saved: dict[str, str] = {}
    path = config_path()
    if path.exists():
        saved = json.loads(path.read_text(encoding="utf-8"))
    url = os.environ.get("STRATAPLANE_URL") or saved.get("url")
    token = os.environ.get("STRATAPLANE_TOKEN") or saved.get("token")
    if not url or not token:
        raise CliError("auth.not_logged_in", "not logged in: run strataplane login")
    transport = ctx.obj if callable(ctx.obj) else urllib_transport
    return Client(url, token, transport)


def login(
    ctx: typer.Context,
    url: Annotated[str, typer.Option(help="Server URL.", envvar="STRATAPLANE_URL")],
    username: Annotated[str, typer.Option(help="Local username.")],
    tenant: Annotated[str, typer.Option(help="Tenant slug.")],
    password: Annotated[str, typer.Option(prompt=True, hide_input=True)],
    token_name: Annotated[str, typer.Option(help="Name of the API token.")] = "cli",  # noqa: S107 - a label
) -> None:
    """Log in and keep an API token for the tenant (mode 0600)."""
    http = Client(url, None, ctx.obj if callable(ctx.obj) else urllib_transport)
    body = {"username": username, "password": password, "tenant": tenant}
    session = http.call("POST", "/auth/login", body=body)
    cookie = session.headers.get("set-cookie", "").split(";", 1)[0]
    headers = {"Cookie": cookie, "X-CSRF-Token": session.json()["csrf_token"]}
    token = http.call("POST", "/tokens", body={"name": token_name}, headers=headers).json()
    http.call("DELETE", "/auth/session", headers=headers)
    path = config_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as file:
        json.dump({"url": url, "token": token["token"], "tenant": tenant}, file)
    os.chmod(path, 0o600)
    err.print(
        f"[green]logged in[/] to {e(tenant)} as {e(username)}; token {token['token_prefix']}..."
    )


cs_app = typer.Typer(
    help="Change sets: propose, validate, review and merge spec edits.", no_args_is_help=True
)
spec_app = typer.Typer(help="The spec's history: log, diff, show, revert.", no_args_is_help=True)
Ref = Annotated[str, typer.Argument(help="Change set: number (12, CS-12) or id.")]
IfMatch = Annotated[
    str | None, typer.Option("--if-match", help="The digest you saw (default: the current one).")
]


def _seen(http: Client, ref: str, digest: str | None) -> tuple[dict[str, Any], dict[str, str]]:
    cs: dict[str, Any] = http.get(f"/change-sets/{ref}")
    return cs, {"If-Match": f'"{digest or cs["digest"]}"'}


def _summary(cs: Mapping[str, Any]) -> None:
    validated = "validated" if cs["validated"] else "not validated"
    approved = (cs.get("requirements") or {}).get("approved")
    extra = ", approved" if approved else ""
    out.print(
        f"CS-{cs['number']} [bold]{cs['state']}[/] on r{cs['base_revision_id']}: "
        f"{e(cs['title'])} ({validated}{extra}; digest {cs['digest'][:12]})"
    )


@cs_app.command("create")
def cs_create(
    ctx: typer.Context,
    title: Annotated[str, typer.Argument()],
    description: Annotated[str, typer.Option()] = "",
) -> None:
    """Start a change set on the latest revision."""
    body = {"title": title, "description": description}
    _summary(client(ctx).call("POST", "/change-sets", body=body).json())


@cs_app.command("list")
def cs_list(ctx: typer.Context, state: Annotated[str | None, typer.Option()] = None) -> None:
    """Change sets, newest first."""
    for cs in client(ctx).get("/change-sets", state=state):
        _summary(cs)


@cs_app.command("show")
def cs_show(ctx: typer.Context, ref: Ref) -> None:
    """A change set: files, diagnostics, and each approval still missing with who can give it."""
    http = client(ctx)
    status = http.get(f"/change-sets/{ref}/approvals")
    cs = status["change_set"]
    _summary(cs)
    for row in http.get(f"/change-sets/{ref}/files"):
        mark = "D" if row["blob_hash"] is None else "A" if row["base_hash"] is None else "M"
        out.print(f"  {mark} {e(row['path'])}")
    _diagnostics(cs)
    _approvals(status)


def _approvals(status: Mapping[str, Any]) -> None:
    verdict = "[green]approved[/]" if status["approved"] else "[yellow]not approved yet[/]"
    out.print(f"approvals: {verdict}")
    for r in status["requirements"]:
        who = (
            "anyone who may review"
            if not r["teams"]
            else f"team {r['teams'][0]}"
            if len(r["teams"]) == 1
            else f"one of the teams {', '.join(r['teams'])}"
        )
        rules = f" ({', '.join(r['rules'])})" if r["rules"] else ""
        state = "[green]met[/]" if r["met"] else f"[red]missing {r['missing']}[/]"
        out.print(f"  {r['count']} approval(s) from {e(who)}{e(rules)}: {state}")
        if r["approved_by"]:
            out.print(f"    approved by: {e(', '.join(r['approved_by']))}")
        if not r["met"]:
            can = ", ".join(r["can_satisfy"]) or "nobody yet: give a member the approver role"
            out.print(f"    can approve: {e(can)}")
    if status["rejected_by"]:
        names = ", ".join(status["rejected_by"])
        out.print(f"  [red]rejected by[/] {e(names)} (a reject blocks until they review again)")


@cs_app.command("edit")
def cs_edit(
    ctx: typer.Context,
    ref: Ref,
    path: Annotated[str, typer.Argument(help="Spec path, e.g. layers/base.toml.")],
    source: Annotated[
        str | None, typer.Argument(help="File with the content, - for stdin.")
    ] = None,
    delete: Annotated[bool, typer.Option("--delete", help="Delete the path.")] = False,
    if_match: IfMatch = None,
) -> None:
    """Write (or delete) one file; it is stored in canonical form."""
    http = client(ctx)
    _cs, headers = _seen(http, ref, if_match)
    target = f"/change-sets/{ref}/files/{urllib.parse.quote(path)}"
    if delete:
        _summary(http.call("DELETE", target, headers=headers).json())
        return
    if source is None:
        raise typer.BadParameter("give a file (or -) with the content, or --delete")
    content = sys.stdin.read() if source == "-" else Path(source).read_text(encoding="utf-8")
    edit = http.call("PUT", target, body={"content": content}, headers=headers).json()
    for notice in edit["notices"]:
        err.print(f"[yellow]{notice['code']}[/] {e(notice['message'])}")
    _summary(edit["change_set"])


@cs_app.command("diff")
def cs_diff(ctx: typer.Context, ref: Ref) -> None:
    """What the change set changes, against its base revision."""
    for d in client(ctx).get(f"/change-sets/{ref}/diff"):
        out.out(d["diff"] or f"(no textual change in {d['path']})\n", end="")


def _diagnostics(cs: Mapping[str, Any]) -> None:
    validation = cs.get("validation")
    if not validation:
        return
    stale = "" if cs["validation_current"] else " [yellow](stale: the change set changed since)[/]"
    verdict = "[green]valid[/]" if validation["ok"] else "[red]invalid[/]"
    out.print(f"validation: {verdict}{stale}")
    if validation["diagnostics"]:
        table = Table("code", "severity", "path", "pointer", "message")
        for d in validation["diagnostics"]:
            cells = (d["code"], d["severity"], d["path"] or "", d["pointer"] or "", d["message"])
            table.add_row(*(e(c) for c in cells))
        out.print(table)


@cs_app.command("validate")
def cs_validate(
    ctx: typer.Context,
    ref: Ref,
    wait: Annotated[bool, typer.Option(help="Wait for the result.")] = True,
    interval: Annotated[float, typer.Option(help="Seconds between polls.")] = 0.2,
) -> None:
    """Run validation as an operation and show its progress and diagnostics."""
    http = client(ctx)
    op = http.call("POST", f"/change-sets/{ref}/validate").json()
    if not wait:
        out.print(f"operation {op['id']} {op['state']}")
        return
    columns = (SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), TaskProgressColumn())
    with Progress(*columns, console=err, transient=True) as progress:
        task = progress.add_task(f"validating {ref}", total=1.0)
        while op["state"] not in ("succeeded", "failed"):
            time.sleep(interval)
            op = http.get(f"/operations/{op['id']}")
            progress.update(task, completed=op["progress"] or 0.0)
    if op["state"] == "failed":
        raise CliError("validation.failed", f"validation failed: {op['error'].get('detail')}")
    if (op["result"] or {}).get("stale"):
        raise CliError(
            "validation.stale", "the change set changed while it was validated; run again"
        )
    cs = http.get(f"/change-sets/{ref}")
    _diagnostics(cs)
    if not cs["validated"]:
        raise typer.Exit(1)


@cs_app.command("submit")
def cs_submit(ctx: typer.Context, ref: Ref, if_match: IfMatch = None) -> None:
    """Ask for review (needs a successful validation of the current digest)."""
    http = client(ctx)
    _cs, headers = _seen(http, ref, if_match)
    _summary(http.call("POST", f"/change-sets/{ref}/submit", headers=headers).json())


@cs_app.command("review")
def cs_review(
    ctx: typer.Context,
    ref: Ref,
    decision: Annotated[str, typer.Argument(help="approve, reject or comment")],
    comment: Annotated[str | None, typer.Option("--comment", "-m")] = None,
    team: Annotated[list[str] | None, typer.Option(help="Act for this team (repeat).")] = None,
    if_match: IfMatch = None,
) -> None:
    """Review the digest you saw; your latest review replaces your earlier ones."""
    http = client(ctx)
    _cs, headers = _seen(http, ref, if_match)
    body = {"decision": decision, "comment": comment, "acting_teams": team}
    review = http.call("POST", f"/change-sets/{ref}/reviews", body=body, headers=headers).json()
    out.print(f"{review['decision']} by {e(review['reviewer_name'])} at {review['digest'][:12]}")
    _summary(http.get(f"/change-sets/{ref}"))


@cs_app.command("merge")
def cs_merge(ctx: typer.Context, ref: Ref, if_match: IfMatch = None) -> None:
    """Create the next revision (refused when the base moved: rebase first)."""
    http = client(ctx)
    _cs, headers = _seen(http, ref, if_match)
    merged = http.call("POST", f"/change-sets/{ref}/merge", headers=headers).json()
    revision = merged["revision"]
    out.print(f"[green]merged[/] as r{revision['id']}: {e(revision['message'])}")


@cs_app.command("rebase")
def cs_rebase(
    ctx: typer.Context,
    ref: Ref,
    ours: Annotated[list[str] | None, typer.Option(help="Keep our content at PATH.")] = None,
    theirs: Annotated[list[str] | None, typer.Option(help="Take theirs at PATH.")] = None,
    use: Annotated[list[str] | None, typer.Option(help="PATH=FILE: new content.")] = None,
    if_match: IfMatch = None,
) -> None:
    """Onto the latest revision; conflicting paths need --ours, --theirs or --use."""
    http = client(ctx)
    _cs, headers = _seen(http, ref, if_match)
    resolutions: dict[str, Any] = dict.fromkeys(ours or [], "ours")
    resolutions |= dict.fromkeys(theirs or [], "theirs")
    for item in use or []:
        path, _, file = item.partition("=")
        resolutions[path] = {"content": Path(file).read_text(encoding="utf-8")}
    body = {"resolutions": resolutions}
    _summary(http.call("POST", f"/change-sets/{ref}/rebase", body=body, headers=headers).json())


@cs_app.command("close")
def cs_close(ctx: typer.Context, ref: Ref) -> None:
    """Close a draft or a change set in review."""
    _summary(client(ctx).call("POST", f"/change-sets/{ref}/close").json())


@spec_app.command("log")
def spec_log(ctx: typer.Context, path: Annotated[str, typer.Argument()]) -> None:
    """The versions of one file, newest first."""
    versions = client(ctx).get("/spec/log", path=path)
    starts = {v["valid_from"] for v in versions}
    for v in versions:
        if v["valid_to"] is not None and v["valid_to"] not in starts:
            out.print(f"r{v['valid_to']}  deleted")
        out.print(f"r{v['valid_from']}  {v['blob_hash'][:12]}  {e(v['message'])}")


@spec_app.command("diff")
def spec_diff(
    ctx: typer.Context, old: Annotated[int, typer.Argument()], new: Annotated[int, typer.Argument()]
) -> None:
    """What changed between two revisions."""
    for d in client(ctx).get("/spec/diff", **{"from": old, "to": new}):
        out.out(d["diff"], end="")


@spec_app.command("show")
def spec_show(
    ctx: typer.Context,
    revision: Annotated[int | None, typer.Argument(help="rN (default: the latest).")] = None,
    path: Annotated[str | None, typer.Argument(help="A file to print.")] = None,
) -> None:
    """A revision's files, or one file's content at it."""
    http = client(ctx)
    number = revision or http.get("/spec/revisions/latest")["id"]
    if path is not None:
        reply = http.call("GET", f"/spec/revisions/{number}/files/{urllib.parse.quote(path)}")
        out.out(reply.body.decode("utf-8"), end="")
        return
    tree = http.get(f"/spec/revisions/{number}/tree")
    out.print(
        f"r{number}: {e(tree['revision']['message'])} (tree {tree['revision']['tree_hash'][:12]})"
    )
    for f in tree["files"]:
        out.print(f"  {f['blob_hash'][:12]}  {e(f['path'])}  ({e(f['owner_team'])})")


@spec_app.command("revert")
def spec_revert(
    ctx: typer.Context,
    revision: Annotated[int, typer.Argument()],
    ours: Annotated[
        list[str] | None, typer.Option(help="On conflict keep the undo at PATH.")
    ] = None,
    theirs: Annotated[list[str] | None, typer.Option(help="On conflict keep the latest.")] = None,
) -> None:
    """Open a change set that undoes a revision."""
    resolutions = dict.fromkeys(ours or [], "ours") | dict.fromkeys(theirs or [], "theirs")
    body = {"revision": revision, "resolutions": resolutions}
    _summary(client(ctx).call("POST", "/change-sets/revert", body=body).json())


@spec_app.command("restore")
def spec_restore(
    ctx: typer.Context,
    revision: Annotated[int, typer.Argument()],
    path: Annotated[list[str] | None, typer.Option(help="Only this path (repeat).")] = None,
) -> None:
    """Open a change set that makes the tree (or paths) equal a revision again."""
    body = {"revision": revision, "paths": path}
    _summary(client(ctx).call("POST", "/change-sets/restore", body=body).json())
