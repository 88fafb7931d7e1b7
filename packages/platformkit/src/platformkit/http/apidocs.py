"""A browsable page of an app's OpenAPI document, rendered on the server from our own code.

FastAPI's own pages load their scripts and styles from a CDN, so an offline server shows a blank
page. This one is plain HTML with its style inline and no script at all: operations grouped by
tag (each a ``<details>`` that opens without JavaScript), their parameters, request bodies and
answers, then every component schema with its properties. Every text taken from the document
is escaped.

    add_api_docs(app, "/api/v1/docs")   # beside openapi_url; docs_url=None in FastAPI(...)
"""

from __future__ import annotations

import json
from html import escape
from typing import Any

from fastapi import FastAPI
from starlette.requests import Request
from starlette.responses import HTMLResponse

__all__ = ["add_api_docs", "render_api_docs", "schema_type"]

METHODS = ("get", "put", "post", "patch", "delete", "head", "options", "trace")
_REF = "#/components/schemas/"
# The page has no script and loads nothing: only its own inline style may apply.
CSP = "default-src 'none'; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'"

_STYLE = """
body{font:15px/1.45 system-ui,sans-serif;margin:0;color:#1b1f24;background:#fff}
header,main{max-width:72rem;margin:0 auto;padding:0 1rem}
header{border-bottom:1px solid #d0d7de;padding-bottom:.5rem}
h1{font-size:1.6rem;margin:.8rem 0 .2rem}h2{margin-top:2rem;font-size:1.25rem}
nav ul{columns:3 14rem;padding-left:1.2rem}
details{border:1px solid #d0d7de;border-radius:6px;margin:.4rem 0}
summary{cursor:pointer;padding:.45rem .6rem;font-family:ui-monospace,monospace}
summary:focus-visible,a:focus-visible{outline:3px solid #0969da;outline-offset:2px}
details>div{padding:0 .8rem .6rem}
.m{display:inline-block;min-width:4.5rem;font-weight:700;text-transform:uppercase}
.get{color:#0a5c2b}.post{color:#0550ae}.put,.patch{color:#7d4e00}.delete{color:#a40e26}
.s{font-family:system-ui,sans-serif;color:#57606a;margin-left:.6rem}
table{border-collapse:collapse;width:100%;margin:.3rem 0}
th,td{text-align:left;border-bottom:1px solid #eaeef2;padding:.25rem .4rem;vertical-align:top}
code,.t{font-family:ui-monospace,monospace;font-size:.9em}
.req{color:#a40e26}
"""


def _anchor(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "-" for c in name)


def _literal(value: object) -> str:
    return escape(json.dumps(value, ensure_ascii=False, default=str), quote=False)


def schema_type(schema: dict[str, Any] | None) -> str:
    """A short HTML rendering of a schema's type: a link for a reference, ``a | b`` for a
    union, ``array of x``, ``map of x``, ``one of: ...`` for an enumeration."""
    if not schema:
        return "any"
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith(_REF):
        name = ref.removeprefix(_REF)
        return f'<a href="#schema-{escape(_anchor(name))}">{escape(name)}</a>'
    for key in ("anyOf", "oneOf", "allOf"):
        options = schema.get(key)
        if isinstance(options, list):
            joiner = " &amp; " if key == "allOf" else " | "
            return joiner.join(schema_type(option) for option in options)
    if "enum" in schema:
        return "one of: " + ", ".join(f"<code>{_literal(v)}</code>" for v in schema["enum"])
    if "const" in schema:
        return f"<code>{_literal(schema['const'])}</code>"
    kind = schema.get("type")
    if kind == "array":
        return "array of " + schema_type(schema.get("items"))
    extra = schema.get("additionalProperties")
    if kind == "object" and isinstance(extra, dict) and not schema.get("properties"):
        return "map of " + schema_type(extra)
    if kind == "object" and schema.get("properties") and schema.get("title"):
        return f"{escape(str(schema['title']))} (object)"  # an inline model, by its name
    if isinstance(kind, list):
        return " | ".join(escape(str(k)) for k in kind)
    text = escape(str(kind or "object"))
    if "format" in schema:
        text += f" ({escape(str(schema['format']))})"
    return text


def _text(value: object) -> str:
    return escape(str(value)) if value else ""


def _parameters(parameters: list[dict[str, Any]]) -> str:
    if not parameters:
        return ""
    rows = "".join(
        f"<tr><td><code>{_text(p.get('name'))}</code>"
        + (' <span class="req">required</span>' if p.get("required") else "")
        + f"</td><td>{_text(p.get('in'))}</td><td class=t>{schema_type(p.get('schema'))}</td>"
        + f"<td>{_text(p.get('description'))}</td></tr>"
        for p in parameters
    )
    head = "<tr><th>name</th><th>in</th><th>type</th><th>description</th></tr>"
    return f"<h4>Parameters</h4><table>{head}{rows}</table>"


def _content(content: dict[str, Any]) -> str:
    return "<br>".join(
        f"<code>{escape(media)}</code>: "
        f"<span class=t>{schema_type((body or {}).get('schema'))}</span>"
        for media, body in content.items()
    )


def _operation(path: str, method: str, op: dict[str, Any]) -> str:
    anchor = _anchor(op.get("operationId") or f"{method}-{path}")
    parts = [
        f'<details id="op-{escape(anchor)}"><summary><span class="m {method}">{method}</span>',
        f"{escape(path)}<span class=s>{_text(op.get('summary'))}</span></summary><div>",
    ]
    if op.get("deprecated"):
        parts.append("<p><strong>Deprecated.</strong></p>")
    if op.get("description"):
        parts.append(f"<p>{escape(op['description'])}</p>")
    parts.append(_parameters(op.get("parameters", [])))
    body = op.get("requestBody")
    if isinstance(body, dict):
        required = ' <span class="req">required</span>' if body.get("required") else ""
        parts.append(f"<h4>Request body{required}</h4><p>{_content(body.get('content', {}))}</p>")
    responses = op.get("responses", {})
    if responses:
        rows = "".join(
            f"<tr><td><code>{escape(str(status))}</code></td>"
            f"<td>{_text(answer.get('description'))}</td>"
            f"<td>{_content(answer.get('content', {}))}</td></tr>"
            for status, answer in responses.items()
        )
        parts.append(f"<h4>Responses</h4><table>{rows}</table>")
    parts.append("</div></details>")
    return "".join(parts)


def _schema(name: str, schema: dict[str, Any]) -> str:
    required = set(schema.get("required", []))
    properties: dict[str, Any] = schema.get("properties", {})
    parts = [
        f'<details id="schema-{escape(_anchor(name))}"><summary>{escape(name)}</summary><div>',
    ]
    if schema.get("description"):
        parts.append(f"<p>{escape(schema['description'])}</p>")
    if properties:
        rows = "".join(
            f"<tr><td><code>{escape(prop)}</code>"
            + (' <span class="req">required</span>' if prop in required else "")
            + f"</td><td class=t>{schema_type(sub)}</td><td>{_text(sub.get('description'))}</td>"
            "</tr>"
            for prop, sub in properties.items()
        )
        parts.append(f"<table><tr><th>property</th><th>type</th><th>description</th></tr>{rows}")
        parts.append("</table>")
    else:
        parts.append(f"<p class=t>{schema_type(schema)}</p>")
    parts.append("</div></details>")
    return "".join(parts)


def render_api_docs(document: dict[str, Any], *, openapi_url: str | None = None) -> str:
    """The whole page for ``document`` (an OpenAPI 3 document as a dict)."""
    info = document.get("info", {})
    groups: dict[str, list[str]] = {}
    for path, item in document.get("paths", {}).items():
        for method in METHODS:
            op = item.get(method)
            if isinstance(op, dict):
                tag = (op.get("tags") or ["other"])[0]
                groups.setdefault(str(tag), []).append(_operation(path, method, op))
    title = _text(info.get("title")) or "API"
    out = [
        '<!doctype html><html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width,initial-scale=1">',
        f"<title>{title} API</title><style>{_STYLE}</style></head><body><header>",
        f"<h1>{title} <small>{_text(info.get('version'))}</small></h1>",
    ]
    if info.get("description"):
        out.append(f"<p>{escape(info['description'])}</p>")
    if openapi_url:
        out.append(f'<p>The document itself: <a href="{escape(openapi_url)}">')
        out.append(f"{escape(openapi_url)}</a></p>")
    out.append('</header><main><nav aria-label="Tags"><h2>Tags</h2><ul>')
    for tag, ops in groups.items():
        out.append(f'<li><a href="#tag-{escape(_anchor(tag))}">{escape(tag)}</a> ({len(ops)})')
    out.append('<li><a href="#schemas">Schemas</a></ul></nav>')
    for tag, ops in groups.items():
        out.append(f'<section><h2 id="tag-{escape(_anchor(tag))}">{escape(tag)}</h2>')
        out.extend(ops)
        out.append("</section>")
    schemas: dict[str, Any] = document.get("components", {}).get("schemas", {})
    out.append('<section><h2 id="schemas">Schemas</h2>')
    out.extend(_schema(name, schemas[name]) for name in sorted(schemas))
    out.append("</section></main></body></html>")
    return "".join(out)


def add_api_docs(app: FastAPI, path: str) -> None:
    """Serve the page of ``app.openapi()`` at ``path``, built once on first use."""
    cached: list[str] = []

    async def docs(request: Request) -> HTMLResponse:
        if not cached:
            cached.append(render_api_docs(app.openapi(), openapi_url=app.openapi_url))
        headers = {"Content-Security-Policy": CSP, "X-Content-Type-Options": "nosniff"}
        return HTMLResponse(cached[0], headers=headers)

    app.add_route(path, docs, methods=["GET"], include_in_schema=False)
