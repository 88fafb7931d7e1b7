"""The task list's filters and cursor pagination against a model of the same data, and the
task detail with its timeline."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest

from .conftest import Seed

NAMES = ["app.billing.charge", "app.billing.refund", "app.mail.send", "app.report_build"]
QUEUES = ["celery", "mail", "reports"]
STATES = ["pending", "started", "succeeded", "failed", "cancelled", "retried", "lost"]
T0 = datetime.now(UTC).replace(microsecond=0) - timedelta(hours=3)
N = 240


class Data:
    def __init__(self, seed: Seed, project: uuid.UUID, agent_ids: list[uuid.UUID]) -> None:
        self.rows: list[dict[str, Any]] = []
        for i in range(N):
            created = T0 + timedelta(seconds=i // 3)  # three tasks per second: ties on time
            self.rows.append(
                {
                    "id": uuid.uuid4(),
                    "created_at": created,
                    "name": NAMES[i % 4],
                    "queue": QUEUES[i % 3],
                    "state": STATES[i % 7],
                    "agent_id": agent_ids[i % 2],
                    "enqueued_at": created - timedelta(minutes=i % 5),
                    "args": [i, f"order-{i}"],
                    "kwargs": {"customer": f"cust-{i % 10}"},
                }
            )
        seed.tasks(project, self.rows)

    def expect(self, keep: Callable[[dict[str, Any]], bool]) -> list[str]:
        chosen = sorted(
            (r for r in self.rows if keep(r)),
            key=lambda r: (r["created_at"], r["id"]),
            reverse=True,
        )
        return [str(r["id"]) for r in chosen]


@pytest.fixture
async def data(seed: Seed) -> tuple[uuid.UUID, Data, list[uuid.UUID]]:
    owner = await seed.user("own@example.com")
    project = await seed.project(owner)
    agent_ids = [(await seed.agent(owner, project, f"a{i}")).agent["id"] for i in range(2)]
    other = await seed.project(owner)
    seed.tasks(other, [{"name": NAMES[0], "state": "failed"} for _ in range(20)])
    return project, Data(seed, project, agent_ids), agent_ids


async def walk(
    http: httpx.AsyncClient, url: str, params: dict[str, Any], limit: int
) -> tuple[list[str], list[dict[str, Any]]]:
    """All ids, following next_cursor; and the pages as answered."""
    ids: list[str] = []
    pages = []
    cursor = None
    while True:
        query = {**params, "limit": limit, **({"cursor": cursor} if cursor else {})}
        response = await http.get(url, params=query)
        assert response.status_code == 200, response.text
        page = response.json()
        pages.append(page)
        ids += [t["id"] for t in page["items"]]
        cursor = page["next_cursor"]
        if cursor is None:
            return ids, pages


def iso(at: datetime) -> str:
    return at.isoformat()


CASES: dict[
    str,
    tuple[
        Callable[[list[uuid.UUID]], dict[str, Any]],
        Callable[[dict[str, Any], list[uuid.UUID]], bool],
    ],
] = {
    "all": (lambda a: {}, lambda r, a: True),
    "one state": (lambda a: {"state": "failed"}, lambda r, a: r["state"] == "failed"),
    "states": (
        lambda a: {"state": ["failed", "lost", "pending"]},
        lambda r, a: r["state"] in ("failed", "lost", "pending"),
    ),
    "states by comma": (
        lambda a: {"state": "succeeded,retried"},
        lambda r, a: r["state"] in ("succeeded", "retried"),
    ),
    "exact name": (
        lambda a: {"name": "app.billing.charge"},
        lambda r, a: r["name"] == "app.billing.charge",
    ),
    "name prefix": (
        lambda a: {"name": "app.billing.*"},
        lambda r, a: r["name"].startswith("app.billing."),
    ),
    "prefix with a wildcard char": (
        lambda a: {"name": "app.report_*"},
        lambda r, a: r["name"].startswith("app.report_"),
    ),
    "queue": (lambda a: {"queue": "mail"}, lambda r, a: r["queue"] == "mail"),
    "agent": (lambda a: {"agent_id": str(a[1])}, lambda r, a: r["agent_id"] == a[1]),
    "created window": (
        lambda a: {
            "since": iso(T0 + timedelta(seconds=10)),
            "until": iso(T0 + timedelta(seconds=30)),
        },
        lambda r, a: T0 + timedelta(seconds=10) <= r["created_at"] < T0 + timedelta(seconds=30),
    ),
    "enqueued window": (
        lambda a: {
            "since": iso(T0),
            "until": iso(T0 + timedelta(seconds=20)),
            "time_field": "enqueued",
        },
        lambda r, a: T0 <= r["enqueued_at"] < T0 + timedelta(seconds=20),
    ),
    "search": (
        lambda a: {"q": "order-17"},
        lambda r, a: f"order-{r['args'][0]}".startswith("order-17"),
    ),
    "search kwargs, combined": (
        lambda a: {"q": "CUST-3", "state": ["failed", "succeeded"], "queue": "celery"},
        lambda r, a: (
            r["kwargs"]["customer"] == "cust-3"
            and r["queue"] == "celery"
            and r["state"] in ("failed", "succeeded")
        ),
    ),
    "no match": (lambda a: {"name": "nope"}, lambda r, a: False),
}


@pytest.mark.parametrize("case", list(CASES))
async def test_filters_and_pages_match_the_model(
    seed: Seed, data: tuple[Any, Data, Any], case: str
) -> None:
    project, model, agent_ids = data
    params_of, keep = CASES[case]
    expected = model.expect(lambda r: keep(r, agent_ids))
    url = f"/api/v1/projects/{project}/tasks"
    async with seed.signed_in("own@example.com") as http:
        ids, pages = await walk(http, url, params_of(agent_ids), limit=9)
        assert ids == expected
        assert all(len(p["items"]) == 9 for p in pages[:-1])
        if len(pages) < 3:
            return
        # Back towards the newest: the page before the third is the second, and newer than
        # the second is a full first page.
        last_of_second = pages[1]["items"][-1]["id"]
        back = await http.get(
            url, params={**params_of(agent_ids), "limit": 9, "cursor": pages[2]["prev_cursor"]}
        )
        assert [t["id"] for t in back.json()["items"]] == [t["id"] for t in pages[1]["items"]]
        assert back.json()["items"][-1]["id"] == last_of_second
        top = await http.get(
            url, params={**params_of(agent_ids), "limit": 9, "cursor": back.json()["prev_cursor"]}
        )
        assert [t["id"] for t in top.json()["items"]] == expected[:9]
        assert top.json()["prev_cursor"] is None


async def test_first_page_has_no_newer_link_and_default_limit(
    seed: Seed, data: tuple[Any, Data, Any]
) -> None:
    project, model, _ = data
    async with seed.signed_in("own@example.com") as http:
        page = (await http.get(f"/api/v1/projects/{project}/tasks")).json()
    assert len(page["items"]) == 50
    assert page["prev_cursor"] is None
    assert [t["id"] for t in page["items"]] == model.expect(lambda r: True)[:50]
    first = page["items"][0]
    assert first["agent_name"] in ("a0", "a1")
    assert first["engine"] == "celery"


async def test_search_defaults_to_a_week(seed: Seed) -> None:
    owner = await seed.user("own@example.com")
    project = await seed.project(owner)
    old = datetime.now(UTC) - timedelta(days=8)
    seed.tasks(
        project,
        [
            {"args": ["needle"], "created_at": old},
            {"args": ["needle"], "created_at": datetime.now(UTC)},
        ],
    )
    url = f"/api/v1/projects/{project}/tasks"
    async with seed.signed_in("own@example.com") as http:
        recent = (await http.get(url, params={"q": "needle"})).json()
        wide = (
            await http.get(url, params={"q": "needle", "since": iso(old - timedelta(days=1))})
        ).json()
        escaped = (await http.get(url, params={"q": "%"})).json()
    assert len(recent["items"]) == 1
    assert recent["search_since"] is not None
    assert len(wide["items"]) == 2
    assert wide["search_since"] is None
    assert escaped["items"] == []  # % is a literal, not a wildcard


@pytest.mark.parametrize(
    ("params", "code"),
    [
        ({"cursor": "bm90LWEtY3Vyc29y"}, "task.cursor_invalid"),
        ({"cursor": "!!"}, "task.cursor_invalid"),
        ({"limit": 0}, "validation_failed"),
        ({"limit": 201}, "validation_failed"),
        ({"state": "exploded"}, "validation_failed"),
        ({"since": "yesterday"}, "validation_failed"),
        ({"agent_id": "x"}, "validation_failed"),
        ({"time_field": "finished"}, "validation_failed"),
        ({"since": "2026-01-02T00:00:00Z", "until": "2026-01-01T00:00:00Z"}, "validation_failed"),
    ],
)
async def test_bad_parameters_are_problems(seed: Seed, params: dict[str, Any], code: str) -> None:
    owner = await seed.user("own@example.com")
    project = await seed.project(owner)
    async with seed.signed_in("own@example.com") as http:
        response = await http.get(f"/api/v1/projects/{project}/tasks", params=params)
    assert response.status_code == 422, response.text
    assert response.json()["code"] == code
