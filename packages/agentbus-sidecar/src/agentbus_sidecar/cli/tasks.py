"""``agentbus task request|accept|reject|progress|complete|fail|cancel|show|list|wait``."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import TYPE_CHECKING, Annotated, Any

import typer

from agentbus_sidecar.actions.task_wait import TERMINAL, WaitResult, wait_for_task
from agentbus_sidecar.actions.tasks import request_task, update_task
from agentbus_sidecar.addresses import normalize_input
from agentbus_sidecar.attachments import upload_files
from agentbus_sidecar.cli.app import task_app
from agentbus_sidecar.cli.common import (
    EXIT_FAILED,
    EXIT_TIMED_OUT,
    Attach,
    JsonFlag,
    WaitTimeout,
    console,
    emit,
    guarded,
    paths,
    read_text_arg,
    run,
)
from agentbus_sidecar.cli.render import progress_text, show_outcome, task_field
from agentbus_sidecar.clock import server_now
from agentbus_sidecar.errors import EnvelopeError
from agentbus_sidecar.runtime import open_runtime

if TYPE_CHECKING:
    from rich.console import Console

TaskId = Annotated[str, typer.Argument(help="tsk_ id")]


def _json_object(value: str | None, option: str) -> dict[str, Any] | None:
    if value is None:
        return None
    try:
        parsed = json.loads(value)
    except ValueError as exc:
        raise typer.BadParameter(f"{option} is not JSON: {exc}") from exc
    if not isinstance(parsed, dict):
        raise typer.BadParameter(f"{option} must be a JSON object")
    return parsed


def _clean(data: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in data.items() if v is not None}


def _lifecycle(
    ctx: typer.Context, task_id: str, verb: str, data: dict[str, Any], as_json: bool
) -> None:
    async def act() -> Any:
        async with open_runtime(paths(ctx).credentials, paths(ctx).state_dir) as rt:
            return await update_task(rt, task_id, verb, _clean(data))

    with guarded(as_json):
        outcome = run(act())
    show_outcome(as_json, outcome, {"task_id": task_id})


@task_app.command()
def request(
    ctx: typer.Context,
    to: Annotated[str, typer.Argument(help="agent://<tenant>/<workspace>/<name>")],
    capability: Annotated[str, typer.Option("--capability", help="e.g. code.review")],
    instructions: Annotated[str | None, typer.Argument(help="`-` or nothing reads stdin.")] = None,
    capability_version: Annotated[str | None, typer.Option("--capability-version")] = None,
    idempotency_key: Annotated[
        str | None,
        typer.Option(
            "--idempotency-key", help="Same key, same recipient: one task (default: the msg id)."
        ),
    ] = None,
    title: Annotated[str | None, typer.Option("--title")] = None,
    input_json: Annotated[str | None, typer.Option("--input", help="JSON object.")] = None,
    deadline: Annotated[str | None, typer.Option("--deadline", help="RFC 3339, UTC, ms.")] = None,
    budget: Annotated[str | None, typer.Option("--budget", help="Max USD, e.g. 2.00")] = None,
    conversation: Annotated[str | None, typer.Option("--conversation")] = None,
    expires_in: Annotated[int | None, typer.Option("--expires-in", help="Seconds.")] = None,
    attach: Attach = None,
    as_json: JsonFlag = False,
) -> None:
    """Ask another agent to do something; the task id is known at once."""
    data = _clean(
        {
            "instructions": read_text_arg(instructions),
            "title": title,
            "input": _json_object(input_json, "--input"),
            "deadline": deadline,
            "budget": {"currency": "USD", "max": budget} if budget else None,
        }
    )
    expires = server_now() + timedelta(seconds=expires_in) if expires_in else None

    async def act() -> Any:
        async with open_runtime(paths(ctx).credentials, paths(ctx).state_dir) as rt:
            if attach:
                data["attachments"] = await upload_files(rt, attach)
            return await request_task(
                rt,
                normalize_input(to),
                data,
                capability=capability,
                capability_ver=capability_version,
                idempotency_key=idempotency_key,
                conversation=conversation,
                expires=expires,
            )

    with guarded(as_json):
        try:
            outcome = run(act())
        except ValueError as exc:
            raise EnvelopeError(str(exc)) from exc
    show_outcome(as_json, outcome, {"task_id": outcome.task_id})


@task_app.command()
def accept(
    ctx: typer.Context,
    task_id: TaskId,
    eta: Annotated[str | None, typer.Option("--eta")] = None,
    note: Annotated[str | None, typer.Option("--note")] = None,
    as_json: JsonFlag = False,
) -> None:
    """Take the task on (recipient)."""
    _lifecycle(ctx, task_id, "accept", {"eta": eta, "note": note}, as_json)


@task_app.command()
def reject(
    ctx: typer.Context,
    task_id: TaskId,
    code: Annotated[str, typer.Option("--code")] = "declined",
    message: Annotated[str | None, typer.Option("--message")] = None,
    as_json: JsonFlag = False,
) -> None:
    """Turn the task down (recipient)."""
    _lifecycle(ctx, task_id, "reject", {"code": code, "message": message}, as_json)


@task_app.command()
def progress(
    ctx: typer.Context,
    task_id: TaskId,
    message: Annotated[str | None, typer.Argument(help="Where the work stands, in words.")] = None,
    percent: Annotated[int | None, typer.Option("--percent", min=0, max=100)] = None,
    stage: Annotated[str | None, typer.Option("--stage")] = None,
    as_json: JsonFlag = False,
) -> None:
    """Report progress (recipient): ``agentbus task progress TSK "tests pass" --percent 60``."""
    _lifecycle(
        ctx, task_id, "progress", {"percent": percent, "stage": stage, "message": message}, as_json
    )


@task_app.command()
def complete(
    ctx: typer.Context,
    task_id: TaskId,
    summary: Annotated[str | None, typer.Argument(help="`-` or nothing: stdin.")] = None,
    output: Annotated[str | None, typer.Option("--output", help="JSON object.")] = None,
    as_json: JsonFlag = False,
) -> None:
    """Finish the task with a result (recipient)."""
    data = {"summary": read_text_arg(summary), "output": _json_object(output, "--output")}
    _lifecycle(ctx, task_id, "complete", data, as_json)


@task_app.command(name="fail")
def fail_task(
    ctx: typer.Context,
    task_id: TaskId,
    message: Annotated[str, typer.Argument(help="What went wrong.")],
    code: Annotated[str, typer.Option("--code")] = "failed",
    retryable: Annotated[bool, typer.Option("--retryable")] = False,
    as_json: JsonFlag = False,
) -> None:
    """Give up on the task (recipient)."""
    _lifecycle(
        ctx, task_id, "fail", {"code": code, "message": message, "retryable": retryable}, as_json
    )


@task_app.command()
def cancel(
    ctx: typer.Context,
    task_id: TaskId,
    reason: Annotated[str | None, typer.Option("--reason")] = None,
    as_json: JsonFlag = False,
) -> None:
    """Call the task off (requester)."""
    _lifecycle(ctx, task_id, "cancel", {"reason": reason}, as_json)


@task_app.command()
def show(ctx: typer.Context, task_id: TaskId, as_json: JsonFlag = False) -> None:
    """The task as the gateway knows it."""

    async def act() -> dict[str, Any]:
        async with open_runtime(paths(ctx).credentials, paths(ctx).state_dir) as rt:
            return await rt.session.call(rt.client.get_task, task_id)

    with guarded(as_json):
        task = run(act())

    def human(out: Console) -> None:
        for name, value in task.items():
            if value is not None:
                out.print(f"{name:<16} {task_field(name, value)}", markup=False)

    emit(as_json, task, human)


@task_app.command(name="list")
def list_tasks(
    ctx: typer.Context,
    role: Annotated[str | None, typer.Option("--role", help="requester or recipient")] = None,
    state: Annotated[str | None, typer.Option("--state")] = None,
    as_json: JsonFlag = False,
) -> None:
    """Tasks this agent asked for or was asked to do."""

    async def act() -> dict[str, Any]:
        async with open_runtime(paths(ctx).credentials, paths(ctx).state_dir) as rt:
            return await rt.session.call(rt.client.list_tasks, role or "", state or "")

    with guarded(as_json):
        answer = run(act())

    def human(out: Console) -> None:
        for task in answer.get("items", []):
            out.print(
                f"{task.get('id')} {task.get('state')} {task.get('capability')} "
                f"{task.get('requester')} -> {task.get('recipient')}",
                markup=False,
            )

    emit(as_json, answer, human)


def _progress_line(task: dict[str, Any]) -> str:
    """The state, and while the task is open its last progress report."""
    progress = {} if task.get("state") in TERMINAL else (task.get("progress") or {})
    return " ".join(part for part in (str(task.get("state")), progress_text(progress)) if part)


def _wait_exit(result: WaitResult) -> int:
    if result.outcome == "timed_out":
        return EXIT_TIMED_OUT
    if result.outcome == "ended" and result.task is not None:
        return 0 if result.task.get("state") == "completed" else EXIT_FAILED
    return EXIT_FAILED


@task_app.command()
def wait(
    ctx: typer.Context,
    task_id: TaskId,
    timeout: WaitTimeout = 600,
    as_json: JsonFlag = False,
) -> None:
    """Wait until the task ends, showing its progress.

    Exit 0 once it completed, 1 when it failed, was rejected, cancelled or expired, 6 when the
    time ran out."""

    def on_change(task: dict[str, Any]) -> None:
        if not as_json:
            console().print(f"{task.get('id')}  {_progress_line(task)}", markup=False)

    async def act() -> WaitResult:
        async with open_runtime(paths(ctx).credentials, paths(ctx).state_dir) as rt:
            return await wait_for_task(rt, task_id, timeout, on_change)

    with guarded(as_json):
        result = run(act())
    answer = {"task_id": task_id, "outcome": result.outcome, "task": result.task,
              "waited_s": round(result.waited_s, 3), "detail": result.detail}  # fmt: skip

    def human(out: Console) -> None:
        task = result.task or {}
        if result.outcome == "refused":
            out.print(
                f"{task_id} will not exist: its request was refused ({result.detail})", markup=False
            )
        elif result.outcome == "timed_out":
            why = f" ({result.detail})" if result.detail else ""
            out.print(
                f"{task_id} still {task.get('state', 'queued')} after {timeout} s{why}",
                markup=False,
            )
        elif task.get("result_msg_id"):
            out.print(f"result: agentbus read {task['result_msg_id']}", markup=False)
        elif task.get("error_code"):
            out.print(f"error code: {task['error_code']}", markup=False)

    emit(as_json, answer, human)
    raise typer.Exit(_wait_exit(result))
