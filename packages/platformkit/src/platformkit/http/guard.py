"""The request guard: bounds and storability checked at the HTTP edge, before an app sees input.

A plain ASGI middleware, installed by :func:`platformkit.http.install` inside the kernel
middleware (so its refusals carry a request id and are counted and logged):

1. **Body size.** A ``Content-Length`` over the route's limit is answered 413
   ``content_too_large`` before a byte is read; a body without one (chunked) is counted as it
   arrives, and once it passes the limit the app's receive fails and whatever the app answers
   is replaced by the same 413. The limit is ``body_limit`` (``DEFAULT_BODY_LIMIT``, 1 MiB)
   unless the longest matching prefix of ``body_limits`` says otherwise; ``None`` there means
   the route streams and bounds its body itself.
2. **JSON bodies** (``application/json``, ``*+json``) are read whole within the limit and
   screened: nested deeper than ``max_depth``, or holding what PostgreSQL cannot store (NUL, a
   lone surrogate, an integer past bigint, a non-finite number: ``platformkit.storable``), is a
   422 ``validation_failed`` naming the field. The screen needs no parse for a clean body
   (:func:`platformkit.boundedjson.may_hold_unstorable`); a suspect one is parsed bounded and
   walked to name the field. Accepted bodies are replayed to the app byte for byte. Form bodies
   (``application/x-www-form-urlencoded``) get the checks of a query string; multipart ones
   (``multipart/form-data``) the same for each part's name and value, and a part that is a file
   upload is refused (no route of the three systems takes files). Routes under a
   ``json_guard_exempt`` prefix (agent ingest, batches that refuse one item alone) only get
   the size limit.
3. **Path and query.** NUL, a lone surrogate or bad UTF-8 (after percent-decoding) in the path
   or in a query parameter is a 422 naming the parameter.

A system whose problems have another shape passes ``problem``: it turns the kernel's
:class:`ContentTooLarge` and :class:`~platformkit.http.problems.ValidationFailed` into its own
errors before they are rendered. Only ``http`` requests are guarded; WebSockets and lifespan
pass through.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any
from urllib.parse import unquote_to_bytes

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Match, Router
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from platformkit import boundedjson
from platformkit.http.handlers import field_error
from platformkit.http.problems import ProblemError, ValidationFailed, problem_response
from platformkit.storable import find_unstorable, unstorable_reason

__all__ = [
    "DEFAULT_BODY_LIMIT",
    "ContentTooLarge",
    "ProblemHook",
    "ProblemRenderer",
    "RequestGuard",
]

DEFAULT_BODY_LIMIT = 1 << 20

type ProblemHook = Callable[[ProblemError], ProblemError]
type ProblemRenderer = Callable[[Request, ProblemError], Awaitable[Response]]

_NOT_UTF8 = "is not valid UTF-8"
_FORM = "application/x-www-form-urlencoded"
_MULTIPART = b"multipart/form-data"
_NO_FILES = "is a file upload; this route takes no files"
_BOUNDARY = re.compile(rb'(?i);\s*boundary\s*=\s*(?:"([^"]{1,70})"|([^\s;]{1,70}))')
_DISPOSITION_PARAM = re.compile(
    rb'(?i);\s*(name|filename\*?)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^;\s]*))'
)
_PLACEHOLDER = re.compile(r"\{[^}/]*\}")


class ContentTooLarge(ProblemError):
    code = "content_too_large"
    status = 413
    title = "Content too large"


class _TooLarge(Exception):
    """Raised from the app's receive once a streamed body passes its limit."""


def _prefix_pattern(prefix: str) -> re.Pattern[str]:
    """A path prefix, where ``{name}`` stands for one segment."""
    parts = _PLACEHOLDER.split(prefix)
    return re.compile("[^/]+".join(re.escape(part) for part in parts))


class _Prefixes:
    """Path prefixes, the longest match first."""

    def __init__(self, prefixes: Iterable[str]) -> None:
        ordered = sorted(set(prefixes), key=len, reverse=True)
        self._patterns = [(p, _prefix_pattern(p)) for p in ordered]

    def match(self, path: str) -> str | None:
        for prefix, pattern in self._patterns:
            if pattern.match(path):
                return prefix
        return None


def _text_problem(raw: bytes, plus: bool) -> tuple[str, str | None]:
    """A query or form part percent-decoded: its text (bad bytes replaced, to name it) and why
    it cannot be accepted, or None."""
    if plus:
        raw = raw.replace(b"+", b" ")
    decoded = unquote_to_bytes(raw) if b"%" in raw else raw
    try:
        text = decoded.decode("utf-8")
    except UnicodeDecodeError:
        return decoded.decode("utf-8", "replace"), _NOT_UTF8
    return text, unstorable_reason(text)


def _pairs_problem(raw: bytes, where: str) -> dict[str, Any] | None:
    """The first parameter of a query string or form body that cannot be accepted."""
    if raw.isascii() and b"%" not in raw and b"\x00" not in raw:
        return None
    for pair in raw.split(b"&"):
        if not pair:
            continue
        name_raw, _, value_raw = pair.partition(b"=")
        name, name_reason = _text_problem(name_raw, plus=True)
        _, value_reason = _text_problem(value_raw, plus=True)
        reason = name_reason or value_reason
        if reason is not None:
            return field_error([where, name], f"{'name' if name_reason else 'value'} {reason}",
                               "value_error")  # fmt: skip
    return None


class RequestGuard:
    def __init__(
        self,
        app: ASGIApp,
        *,
        body_limit: int = DEFAULT_BODY_LIMIT,
        body_limits: Mapping[str, int | None] | None = None,
        json_guard_exempt: Iterable[str] = (),
        max_depth: int = boundedjson.DEFAULT_MAX_DEPTH,
        problem: ProblemHook | None = None,
        render: ProblemRenderer | None = None,
        router: Router | None = None,
    ) -> None:
        self.app = app
        self._render = render
        self.body_limit = body_limit
        self._limits = dict(body_limits or {})
        self._limit_prefixes = _Prefixes(self._limits)
        self._exempt = _Prefixes(json_guard_exempt)
        self.max_depth = max_depth
        self._problem = problem
        self._router = router

    def limit_for(self, path: str) -> int | None:
        """The body limit of a request path (None: the route bounds its body itself)."""
        prefix = self._limit_prefixes.match(path)
        return self.body_limit if prefix is None else self._limits[prefix]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path: str = scope["path"]
        refused = self._target_problem(scope)
        if refused is not None:
            await self._refuse(refused, scope, receive, send)
            return
        limit = self.limit_for(path)
        declared: bytes | None = None
        content_type = b""
        for name, value in scope["headers"]:
            if name == b"content-length":
                declared = value
            elif name == b"content-type":
                content_type = value
        too_long = declared is not None and declared.isdigit() and int(declared) > (limit or 0)
        if limit is not None and too_long:
            await self._refuse(self._too_large(limit), scope, receive, send)
            return
        kind = _body_kind(content_type)
        if kind is None or limit is None or self._exempt.match(path) is not None:
            if limit is None:
                await self.app(scope, receive, send)
            else:
                await self._counted(limit, scope, receive, send)
            return
        body = await self._read(limit, receive)
        if body is None:  # the client left
            return
        if isinstance(body, ProblemError):
            await self._refuse(body, scope, receive, send)
            return
        if kind == "json":
            problem = self._json_problem(body)
        elif kind == "multipart":
            problem = _multipart_problem(body, content_type)
        else:
            problem = _pairs_problem(body, "body")
        if problem is not None:
            await self._refuse(self._invalid([problem]), scope, receive, send)
            return
        await self.app(scope, _replay(body, receive), send)

    def _target_problem(self, scope: Scope) -> ProblemError | None:
        error = _pairs_problem(scope.get("query_string", b""), "query")
        if error is None:
            error = self._path_problem(scope)
        return None if error is None else self._invalid([error])

    def _path_problem(self, scope: Scope) -> dict[str, Any] | None:
        path: str = scope["path"]
        reason = unstorable_reason(path)
        raw: bytes | None = scope.get("raw_path")
        if reason is None and raw and (b"%" in raw or not raw.isascii()):
            _, reason = _text_problem(raw, plus=False)
        if reason is None:
            return None
        return field_error(["path", self._path_param(scope)], reason, "value_error")

    def _path_param(self, scope: Scope) -> str:
        """The name of the route's path parameter that holds the bad text, else ``path``."""
        routes = self._router.routes if self._router is not None else []
        return _bad_param(routes, scope) or "path"

    def _json_problem(self, body: bytes) -> dict[str, Any] | None:
        if not body:
            return None
        if boundedjson.exceeds_depth(body, self.max_depth):
            return field_error(["body"], f"nested deeper than {self.max_depth} levels",
                               "json_invalid")  # fmt: skip
        if not boundedjson.may_hold_unstorable(body):
            return None
        try:
            value = boundedjson.loads(body, max_depth=self.max_depth)
        except boundedjson.JsonRefused as exc:
            return field_error(["body"], exc.reason, "json_invalid")
        found = find_unstorable(value)
        if found is None:
            return None
        return field_error(["body", *found.loc], found.reason, "value_error")

    async def _read(self, limit: int, receive: Receive) -> bytes | ProblemError | None:
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return None
            chunk: bytes = message.get("body", b"")
            size += len(chunk)
            if size > limit:
                return self._too_large(limit)
            chunks.append(chunk)
            if not message.get("more_body", False):
                return chunks[0] if len(chunks) == 1 else b"".join(chunks)

    async def _counted(self, limit: int, scope: Scope, receive: Receive, send: Send) -> None:
        """Run the app with a receive that fails once the body passes ``limit``; from then on
        the app's answer, if it had not started one, is replaced by the 413."""
        size = 0
        exceeded = False
        started = False

        async def counting_receive() -> Message:
            nonlocal size, exceeded
            if exceeded:
                raise _TooLarge
            message = await receive()
            if message["type"] == "http.request":
                size += len(message.get("body", b""))
                if size > limit:
                    exceeded = True
                    raise _TooLarge
            return message

        async def watching_send(message: Message) -> None:
            nonlocal started
            if exceeded and not started:
                return  # the app's answer to a body it could not read: replaced below
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, counting_receive, watching_send)
        except Exception:
            if not exceeded or started:
                raise
        if exceeded and not started:
            await self._refuse(self._too_large(limit), scope, receive, send)

    def _too_large(self, limit: int) -> ProblemError:
        return self._hooked(ContentTooLarge(f"the body is over {limit} bytes", limit=limit))

    def _invalid(self, errors: list[dict[str, Any]]) -> ProblemError:
        return self._hooked(ValidationFailed(f"{len(errors)} invalid field(s)", errors=errors))

    def _hooked(self, error: ProblemError) -> ProblemError:
        return error if self._problem is None else self._problem(error)

    async def _refuse(
        self, error: ProblemError, scope: Scope, receive: Receive, send: Send
    ) -> None:
        if self._render is None:
            await problem_response(error, scope["path"])(scope, receive, send)
        else:  # the system's own answer, an HTML page for a browser's pages
            await (await self._render(Request(scope), error))(scope, receive, send)


def _bad_param(routes: Iterable[BaseRoute], scope: Scope) -> str | None:
    """Among the routes matching ``scope``, the first path parameter with text that cannot be
    accepted: mounts and routers are searched too (FastAPI's included routers through their
    original router and prefix; a shape this does not know leaves the answer to ``path``)."""
    for route in routes:
        match, child = route.matches(scope)
        if match is Match.NONE:
            continue
        for name, value in child.get("path_params", {}).items():
            text = str(value)
            if unstorable_reason(text) is not None or "\ufffd" in text:
                return str(name)
        inner = getattr(route, "routes", None)
        inner_scope = {**scope, **child}
        if inner is None:  # FastAPI's included router
            inner = getattr(getattr(route, "original_router", None), "routes", None)
            prefix = getattr(getattr(route, "include_context", None), "prefix", "")
            inner_scope["root_path"] = str(scope.get("root_path", "")) + str(prefix or "")
        found = _bad_param(inner, inner_scope) if isinstance(inner, list) else None
        if found is not None:
            return found
    return None


def _body_kind(content_type: bytes) -> str | None:
    media = content_type.partition(b";")[0].strip().lower()
    if media == b"application/json" or media.endswith(b"+json"):
        return "json"
    if media == _FORM.encode():
        return "form"
    if media == _MULTIPART:
        return "multipart"
    return None


def _multipart_problem(body: bytes, content_type: bytes) -> dict[str, Any] | None:
    """The first part of a ``multipart/form-data`` body that cannot be accepted: a name or value
    that is not UTF-8 or holds what PostgreSQL cannot store, or a file upload. A body of UTF-8
    without NUL that never says ``filename`` is passed without being split (the common case);
    a suspect one is split to name the part, and refused as a whole if no part is to blame."""
    text = b"\x00" not in body and _is_utf8(body)  # valid UTF-8 has no lone surrogate
    if text and b"filename" not in body.lower():
        return None
    found = _BOUNDARY.search(content_type)
    boundary = (found.group(1) or found.group(2)) if found else None
    for name, filename, value in _parts(body, boundary) if boundary else ():
        name_text, name_reason = _part_text(name)
        if filename is not None:
            return field_error(["body", name_text], _NO_FILES, "value_error")
        reason = name_reason or _part_text(value)[1]
        if reason is not None:
            which = "name" if name_reason else "value"
            return field_error(["body", name_text], f"{which} {reason}", "value_error")
    if text:  # "filename" was a value's text
        return None
    return field_error(["body"], "is not multipart form data of UTF-8 text", "value_error")


def _is_utf8(data: bytes) -> bool:
    if data.isascii():
        return True
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _parts(body: bytes, boundary: bytes) -> Iterable[tuple[bytes, bytes | None, bytes]]:
    """Each part of a multipart body: its name, its filename (None: a plain field), its value."""
    for chunk in body.split(b"--" + boundary)[1:]:
        if chunk.startswith(b"--"):
            return  # the closing delimiter
        head, _, value = chunk.partition(b"\r\n\r\n")
        name, filename = b"", None
        for line in head.split(b"\r\n"):
            key, _, rest = line.partition(b":")
            if key.strip().lower() != b"content-disposition":
                continue
            for param in _DISPOSITION_PARAM.finditer(rest):
                text = param.group(2) if param.group(2) is not None else param.group(3)
                if param.group(1).lower() == b"name":
                    name = text
                else:
                    filename = text
        yield name, filename, value.removesuffix(b"\r\n")


def _part_text(raw: bytes) -> tuple[str, str | None]:
    """A part's name or value as text (bad bytes replaced, to name it) and why it cannot be
    accepted, or None."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return raw.decode("utf-8", "replace"), _NOT_UTF8
    return text, unstorable_reason(text)


def _replay(body: bytes, receive: Receive) -> Receive:
    """The body, read already, as one message; then the client's own messages (disconnect)."""
    pending = True

    async def replay() -> Message:
        nonlocal pending
        if pending:
            pending = False
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay
