"""``agentbus blob put | get``: files as blobs, outside a message (04-API-SPEC.md §8)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from agentbus_sidecar.attachments import fetch_blob, upload_files
from agentbus_sidecar.cli.app import blob_app
from agentbus_sidecar.cli.common import JsonFlag, emit, guarded, paths, run
from agentbus_sidecar.errors import SidecarError
from agentbus_sidecar.runtime import open_runtime

if TYPE_CHECKING:
    from rich.console import Console


@blob_app.command(name="put")
def blob_put(
    ctx: typer.Context,
    path: Annotated[Path, typer.Argument(exists=True, dir_okay=False, help="The file.")],
    as_json: JsonFlag = False,
) -> None:
    """Upload a file; prints the attachment item that names it (``"blob": "blb_..."``)."""

    async def act() -> dict[str, Any]:
        async with open_runtime(paths(ctx).credentials, paths(ctx).state_dir) as rt:
            (item,) = await upload_files(rt, [path])
            return item

    with guarded(as_json):
        item = run(act())

    def human(out: Console) -> None:
        out.print(f"{item['blob']}  {item['content_type']}  {item['name']}", markup=False)

    emit(as_json, item, human)


@blob_app.command(name="get")
def blob_get(
    ctx: typer.Context,
    blob_id: Annotated[str, typer.Argument(help="blb_ id")],
    message: Annotated[
        str | None,
        typer.Option("--message", help="The msg_ id that attached it (unless you uploaded it)."),
    ] = None,
    output: Annotated[
        Path | None,
        typer.Option("--output", "-o", help="Where to write it; `-` for standard output."),
    ] = None,
    as_json: JsonFlag = False,
) -> None:
    """Download a blob, its digest checked; written to --output (default: the blob id)."""
    target = output or Path(blob_id)

    async def act() -> tuple[int, str]:
        async with open_runtime(paths(ctx).credentials, paths(ctx).state_dir) as rt:
            data, content_type = await fetch_blob(rt, blob_id, message)
        if str(target) == "-":
            sys.stdout.buffer.write(data)
            sys.stdout.buffer.flush()
        else:
            try:
                target.write_bytes(data)
            except OSError as exc:
                raise SidecarError(f"cannot write {target}: {exc.strerror or exc}") from exc
        return len(data), content_type

    with guarded(as_json):
        size, content_type = run(act())
    if str(target) == "-":
        return

    def human(out: Console) -> None:
        out.print(f"wrote {size} bytes ({content_type}) to {target}", markup=False)

    emit(as_json, {"blob": blob_id, "path": str(target), "size_bytes": size,
                   "content_type": content_type}, human)  # fmt: skip
