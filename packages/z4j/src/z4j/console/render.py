"""Rendering dashboard pages: the Jinja2 environment, its filters, and the page helpers.

Times are shown relative ("3 min ago") with the absolute time beside or in the title, in the
project's time zone (``projects.settings.timezone``, UTC by default) and named with its zone;
the page script keeps the relative text fresh, and without script it is right as of the render.
"""

from __future__ import annotations

import json
from contextvars import ContextVar
from datetime import UTC, datetime, tzinfo
from importlib.resources import files
from pathlib import Path
from typing import Any
from urllib.parse import quote
from zoneinfo import ZoneInfo

from jinja2 import Environment, FileSystemLoader, select_autoescape
from platformkit.http import ProblemError
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response

from z4j import __version__
from z4j.actions import sessions
from z4j.actions.errors import AuthRequired
from z4j.api.v1.deps import session_of
from z4j.domain.retention import of_settings

TEMPLATES = Path(str(files("z4j") / "templates"))
STATIC = Path(str(files("z4j") / "static"))
FRAGMENT_HEADER = "X-Z4J-Fragment"


def reltime(value: datetime | None, now: datetime | None = None) -> str:
    if value is None:
        return "never"
    seconds = ((now or datetime.now(UTC)) - value).total_seconds()
    ahead, seconds = seconds < 0, abs(seconds)
    if seconds < 5:
        return "just now"
    for size, unit in ((86400, "d"), (3600, "h"), (60, "min"), (1, "s")):
        if seconds >= size:
            amount = f"{int(seconds // size)} {unit}"
            return f"in {amount}" if ahead else f"{amount} ago"
    return "just now"


# The zone of the page being rendered: the project's, set by ``render`` for its duration.
ZONE: ContextVar[tzinfo] = ContextVar("z4j_page_zone", default=UTC)


def zone_of(project: Any) -> tzinfo:
    """The time zone a project's pages show times in."""
    settings = project.get("settings") if isinstance(project, dict) else None
    name = of_settings(settings).timezone
    return UTC if name == "UTC" else ZoneInfo(name)


def zone_name(zone: tzinfo | None = None) -> str:
    zone = zone or ZONE.get()
    return str(getattr(zone, "key", None) or zone.tzname(None) or "UTC")


def abstime(value: datetime | None) -> str:
    """``2026-01-31 13:00:00 CET``: in the page's zone, with the zone's abbreviation."""
    if value is None:
        return ""
    return value.astimezone(ZONE.get()).strftime("%Y-%m-%d %H:%M:%S %Z")


def isotime(value: datetime | None) -> str:
    return "" if value is None else value.astimezone(UTC).isoformat().replace("+00:00", "Z")


def precise(value: datetime | None) -> str:
    """Agent-clock times on the timeline: milliseconds matter there."""
    return "" if value is None else value.astimezone(ZONE.get()).strftime("%H:%M:%S.%f")[:-3]


def duration(ms: float | None) -> str:
    if ms is None:
        return ""
    if ms < 1000:
        return f"{ms:.0f} ms"
    if ms < 60_000:
        return f"{ms / 1000:.2f} s"
    minutes, seconds = divmod(ms / 1000, 60)
    return f"{int(minutes)} min {int(seconds)} s"


def pretty_json(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=False, default=str)


env = Environment(
    loader=FileSystemLoader(TEMPLATES),
    autoescape=select_autoescape(["html"]),
    trim_blocks=True,
    lstrip_blocks=True,
)
env.filters.update(
    reltime=reltime,
    abstime=abstime,
    zone_name=zone_name,
    isotime=isotime,
    duration=duration,
    pretty_json=pretty_json,
    precise=precise,
)
env.globals["version"] = __version__


def render(
    request: Request,
    template: str,
    status: int = 200,
    headers: dict[str, str] | None = None,
    **context: Any,
) -> HTMLResponse:
    session = session_of(request)
    brain = request.app.state.brain
    context.setdefault("user", session.user if session else None)
    context.setdefault("csrf", sessions.csrf_token(brain, session.session_id) if session else "")
    context.setdefault("path", request.url.path)
    zone = zone_of(context.get("project"))
    context.setdefault("zone", zone_name(zone))
    token = ZONE.set(zone)
    try:
        html = env.get_template(template).render(request=request, **context)
    finally:
        ZONE.reset(token)
    out = HTMLResponse(html, status_code=status, headers=headers)
    out.headers.setdefault("Cache-Control", "no-store")
    return out


def render_fragment(request: Request, template: str, **context: Any) -> HTMLResponse:
    """A piece of a page, fetched again by the live-update script."""
    return render(request, template, headers={FRAGMENT_HEADER: "1"}, **context)


def wants_fragment(request: Request) -> bool:
    return request.query_params.get("fragment") == "1"


def safe_next(target: str | None) -> str:
    """Only same-site paths: never an absolute or scheme-relative URL (open redirect)."""
    if target and target.startswith("/") and not target.startswith(("//", "/\\")):
        return target
    return "/projects"


async def error_page(request: Request, exc: ProblemError) -> Response:
    if isinstance(exc, AuthRequired):
        target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
        return RedirectResponse(f"/login?next={quote(target, safe='/')}", status_code=303)
    return render(request, "error.html", status=exc.status, error=exc, status_code=exc.status)
