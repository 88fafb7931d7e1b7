"""The API docs page: rendered from the app's own OpenAPI document, grouped by tag, with
parameters, bodies, answers and schemas, escaped, and with nothing loaded from elsewhere."""

from __future__ import annotations

import re
from typing import Annotated

import httpx
from fastapi import FastAPI, Query
from hypothesis import given
from hypothesis import strategies as st
from platformkit.http.apidocs import CSP, add_api_docs, render_api_docs, schema_type
from pydantic import BaseModel, Field


class Widget(BaseModel):
    """A thing with a <b>name</b>."""

    name: str = Field(description="What it is called")
    size: int | None = None
    tags: list[str] = []


OWN_TAGS = {"html", "head", "meta", "title", "style", "body", "header", "h1", "h2", "h4", "small",
            "p", "a", "main", "nav", "ul", "li", "section", "details", "summary", "span",
            "div", "table", "tr", "th", "td", "code", "br", "strong"}  # fmt: skip


def make_app() -> FastAPI:
    app = FastAPI(title="demo", version="9.9", docs_url=None, redoc_url=None)

    @app.post("/widgets", tags=["widgets"], summary="Create a widget")
    async def create(body: Widget) -> Widget:
        return body

    @app.get("/widgets/{wid}", tags=["widgets"])
    async def get(wid: int, verbose: Annotated[bool, Query(description="more")] = False) -> Widget:
        return Widget(name=str(wid))

    @app.get("/other")
    async def other() -> dict[str, int]:
        return {}

    add_api_docs(app, "/docs")
    return app


async def test_the_page_shows_operations_by_tag_with_their_parts() -> None:
    app = make_app()
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://t") as http:
        answer = await http.get("/docs")
    assert answer.status_code == 200
    assert answer.headers["content-type"].startswith("text/html")
    assert answer.headers["content-security-policy"] == CSP
    page = answer.text
    assert 'id="tag-widgets"' in page
    assert 'id="tag-other"' in page
    widgets = page[page.index('id="tag-widgets"') : page.index('id="tag-other"')]
    assert "/widgets/{wid}" in widgets
    assert "Create a widget" in widgets
    assert "<code>verbose</code>" in widgets
    assert "more" in widgets
    assert '<code>wid</code> <span class="req">required</span>' in widgets
    assert '<a href="#schema-Widget">Widget</a>' in widgets  # request body and answer
    assert 'id="schema-Widget"' in page
    assert "What it is called" in page
    assert "array of string" in page
    assert "integer | null" in page
    assert "A thing with a &lt;b&gt;name&lt;/b&gt;." in page  # escaped, not markup
    # nothing from elsewhere: no script, no external stylesheet or image
    assert "<script" not in page.lower()
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", page)


@given(st.text())
def test_text_from_the_document_is_always_escaped(hostile: str) -> None:
    document = {
        "info": {"title": hostile, "version": hostile, "description": hostile},
        "paths": {
            "/x": {"get": {"tags": [hostile], "summary": hostile, "description": hostile,
                           "parameters": [{"name": hostile, "in": "query",
                                           "description": hostile}],
                           "responses": {"200": {"description": hostile}}}},
        },
        "components": {"schemas": {hostile or "n": {"description": hostile,
                                                     "enum": [hostile]}}},
    }  # fmt: skip
    page = render_api_docs(document)
    tags = {name.lower() for name in re.findall(r"</?([A-Za-z][A-Za-z0-9]*)", page)}
    assert tags <= OWN_TAGS  # whatever the document says, no element of its own
    assert page.count("<details") == page.count("</details>")


def test_schema_types_read_naturally() -> None:
    assert schema_type({"type": "object", "additionalProperties": {"type": "integer"}}) == (
        "map of integer"
    )
    assert schema_type({"type": "string", "format": "uuid"}) == "string (uuid)"
    assert schema_type({"enum": ["a", "b"]}) == 'one of: <code>"a"</code>, <code>"b"</code>'
    assert schema_type(None) == "any"
