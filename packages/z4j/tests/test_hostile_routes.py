"""Hostile input on every write route of the brain, found by walking the app: in each JSON
body NUL in a text field, 2**70 in any field, a deeply nested array and a body over the limit
are a 4xx problem; on every dashboard form NUL and bad UTF-8 are a 4xx, an oversize body 413,
and 2**70 as text never a 500."""

from __future__ import annotations

import re
import uuid

from .conftest import Seed
from .hostile import assert_form_refused, assert_refused, form_token
from .test_viewer_writes import AGENT, body_for, write_routes


async def test_every_json_write_route_refuses_hostile_bodies(seed: Seed) -> None:
    admin = await seed.user("root@example.com", is_admin=True)
    project = await seed.project(admin)
    seen = 0
    async with seed.signed_in("root@example.com") as http:
        for method, template, model in write_routes(seed.app):
            body = body_for(model, project)
            if not template.startswith("/api/") or template.startswith(AGENT) or not body:
                continue
            path = re.sub(r"\{(\w+)\}", lambda m: str(project if m.group(1) == "project_id"
                                                      else uuid.uuid4()), template)  # fmt: skip
            await assert_refused(http, method, path, body)
            seen += 1
    assert seen >= 15


async def test_every_dashboard_form_refuses_hostile_fields(seed: Seed) -> None:
    admin = await seed.user("root@example.com", is_admin=True)
    project = await seed.project(admin)
    seen = 0
    async with seed.signed_in("root@example.com") as http:
        csrf = form_token((await http.get("/account")).text)
        # signing out last: a valid form there ends the session the others need
        routes = sorted(write_routes(seed.app), key=lambda r: r[1] == "/logout")
        for method, template, _model in routes:
            if template.startswith("/api/") or method != "POST":
                continue
            path = re.sub(r"\{(\w+)\}", lambda m: str(project if m.group(1) == "project_id"
                                                      else uuid.uuid4()), template)  # fmt: skip
            await assert_form_refused(
                http, path, {"csrf_token": csrf, "email": "a@example.com", "code": "123456"}
            )
            seen += 1
    assert seen >= 20
