"""Rendering console pages: the Jinja2 environment, its filters, and the HTML error page.

Pages are complete without script; ``static/console.js`` only refreshes the live parts when the
page's event stream says something changed. Every page answers ``Cache-Control: no-store``.
"""

from __future__ import annotations

from datetime import UTC, datetime
from importlib.resources import files
from pathlib import Path
from typing import Any
from urllib.parse import quote

from jinja2 import Environment, FileSystemLoader, select_autoescape
from platformkit.http import ProblemError, problem_response
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response

from strataplane import __version__, errors
from strataplane.api.v1 import oidc as oidc_api

HERE = Path(str(files("strataplane") / "console"))
TEMPLATES = HERE / "templates"
STATIC = HERE / "static"
STATIC_PATH = "/console-static"
FRAGMENT_HEADER = "X-Console-Fragment"
TAG = "console"  # the routers' tag: how the error handler knows a console page


def reltime(value: datetime | None, now: datetime | None = None) -> str:
    if value is None:
        return "never"
    seconds = ((now or datetime.now(UTC)) - value).total_seconds()
    ahead, seconds = seconds < 0, abs(seconds)
    for size, unit in ((86400, "d"), (3600, "h"), (60, "min"), (1, "s")):
        if seconds >= size:
            amount = f"{int(seconds // size)} {unit}"
            return f"in {amount}" if ahead else f"{amount} ago"
    return "just now"


def abstime(value: datetime | None) -> str:
    return "" if value is None else value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def isotime(value: datetime | None) -> str:
    return "" if value is None else value.astimezone(UTC).isoformat().replace("+00:00", "Z")


def hexshort(value: bytes | None) -> str:
    return "" if value is None else value.hex()[:12]


env = Environment(
    loader=FileSystemLoader(TEMPLATES),
    autoescape=select_autoescape(["html"]),
    trim_blocks=True,
    lstrip_blocks=True,
)
env.filters.update(reltime=reltime, abstime=abstime, isotime=isotime, hexshort=hexshort)
env.globals.update(version=__version__, static=STATIC_PATH)


def render(
    request: Request,
    template: str,
    *,
    status: int = 200,
    headers: dict[str, str] | None = None,
    **context: Any,
) -> HTMLResponse:
    context.setdefault("page", getattr(request.state, "console_page", None))
    context.setdefault("path", request.url.path)
    html = env.get_template(template).render(request=request, **context)
    out = HTMLResponse(html, status_code=status, headers=headers)
    out.headers["Cache-Control"] = "no-store"
    out.headers["X-Frame-Options"] = "DENY"
    out.headers["Content-Security-Policy"] = (
        "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; "
        "frame-ancestors 'none'; base-uri 'none'; form-action 'self'"
    )
    return out


REFUSALS = (409, 422)  # what a form's action refuses: shown on the form's page, not an error page


def refused(exc: Exception) -> bool:
    return isinstance(exc, ProblemError) and exc.status in REFUSALS


def wants_fragment(request: Request) -> bool:
    return request.query_params.get("fragment") == "1"


def safe_next(target: str | None, default: str = "/fleet") -> str:
    """Where a sign-in may send the browser on: a path on this server (the API's rule)."""
    return oidc_api.safe_next(target, default)


def is_sign_on(request: Request) -> bool:
    """The provider's round trip, navigated by a browser (one that takes HTML); other clients
    keep problem+json."""
    accepted = request.headers.get("accept", "")
    return request.url.path.startswith(oidc_api.PREFIX) and "text/html" in accepted


def is_console(request: Request) -> bool:
    route = request.scope.get("route")
    return TAG in (getattr(route, "tags", None) or ())


async def error_page(request: Request, exc: Exception) -> Response:
    """Console pages answer errors as a page (sign-in needed: the sign-in page); the API keeps
    its problem+json."""
    assert isinstance(exc, ProblemError)  # registered for ProblemError only
    if is_sign_on(request):  # a failed sign-on: the page, with the way back to sign-in
        return render(request, "error.html", status=exc.status, error=exc, sign_in=True)
    if not is_console(request):
        return problem_response(exc, request.url.path)
    target = quote(request.url.path, safe="/")
    if isinstance(exc, errors.AuthRequired):
        return RedirectResponse(f"/login?next={target}", status_code=303)
    if exc.code == "auth.choose_tenant":
        return RedirectResponse(f"/login/choose?next={target}", status_code=303)
    return render(request, "error.html", status=exc.status, error=exc)
