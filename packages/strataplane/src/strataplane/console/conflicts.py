"""Resolving conflicts in the browser: the page showing each conflicting file (at the base, on
our side, on theirs) with the choice of ours, theirs or an edited version, and reading those
choices back as the resolutions a rebase or a revert takes (the API's)."""

from __future__ import annotations

from typing import Any

from platformkit.http import ProblemError
from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.responses import Response

from strataplane.actions import history
from strataplane.actions.change_sets import InvalidResolution, RebaseConflict
from strataplane.console.render import render
from strataplane.console.session import Viewer, field

CHOICES = ("ours", "theirs", "edited")
MAX_CONFLICTS = 200


def resolutions_of(form: FormData) -> tuple[dict[str, str | bytes], dict[str, str]]:
    """The posted resolutions by path (``path-N``, ``choice-N``, ``content-N``), and the edited
    texts as typed (shown again if the action refuses them)."""
    chosen: dict[str, str | bytes] = {}
    typed: dict[str, str] = {}
    for n in range(MAX_CONFLICTS):
        path = field(form, f"path-{n}", 1024)
        if not path:
            break
        choice = field(form, f"choice-{n}", 10)
        if choice not in CHOICES:
            raise InvalidResolution(f"{path}: choose ours, theirs or edited", path=path)
        typed[path] = field(form, f"content-{n}")
        chosen[path] = typed[path].encode() if choice == "edited" else choice
    return chosen, typed


def _text(content: bytes | None) -> str | None:
    return None if content is None else content.decode("utf-8", "replace")


async def conflicts_page(
    request: Request, viewer: Viewer, conflict: RebaseConflict, **context: Any
) -> Response:
    """The page for ``conflict``'s files (409: nothing changed yet; a refused edit: 422);
    ``context`` names the form's ``action``, ``heading``, ``intro``, ``back`` link, and the
    ``digest`` to post."""
    found = list(conflict.data.get("conflicts", []))[:MAX_CONFLICTS]
    hashes = {bytes.fromhex(h) for c in found for h in (c["base"], c["ours"], c["theirs"]) if h}
    contents = await history.blobs_of(viewer.ctx, hashes)

    def side(h: str | None) -> str | None:
        return None if h is None else _text(contents.get(bytes.fromhex(h)))

    files = [
        {"path": c["path"], "base": side(c["base"]), "ours": side(c["ours"]),
         "theirs": side(c["theirs"])}
        for c in found
    ]  # fmt: skip
    refusal = context.get("refusal")  # an edited version refused: its own status
    status = refusal.status if isinstance(refusal, ProblemError) else RebaseConflict.status
    return render(request, "conflicts.html", files=files, status=status, **context)
