"""A Celery beat scheduler whose schedules live in the z4j brain::

    celery -A proj beat -S z4j_agent.beat:BrainScheduler

It reads the schedules of its agent's project from the brain (``GET /api/v1/agent/schedules``
with the agent's token, ``Z4J_BRAIN_URL`` and ``Z4J_TOKEN`` as for the agent) every
``Z4J_BEAT_SYNC_SECONDS`` (default 5; ``app.conf.z4j_beat_sync_seconds``), sending the last
ETag so that an unchanged list costs a 304. An edit, an enable or disable or a "run now" in the
brain reaches the beat at its next sync.

When a schedule's ``next_run_at`` comes, the beat first claims that slot from the brain with the
task id it will send; only a won claim is sent. The brain lets one claim win each slot and
moves ``next_run_at`` on, so two beat processes (a standby, or one started by mistake) never
send the same run twice, and a beat that cannot reach the brain sends nothing. A run is sent at
most once: a claim won by a beat that dies before sending it is not sent again.

The app's own ``beat_schedule`` is reported to the brain when the beat starts: entries the
project does not have yet (by name) become brain schedules, run like the others; a name the brain
has is left as the brain has it, so edits made in the brain win. Crontab and interval entries are
taken; solar and other schedule classes are logged and skipped.
"""

from __future__ import annotations

import json
import logging
import math
import os
import time
import urllib.error
import urllib.request
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from celery.beat import Scheduler  # type: ignore[import-untyped]
from celery.schedules import crontab  # type: ignore[import-untyped]
from celery.schedules import schedule as interval_schedule

from z4j_agent.config import AgentConfig, load_config

__all__ = ["BrainScheduler"]

logger = logging.getLogger("z4j_agent.beat")
DEFAULT_SYNC_SECONDS = 5.0
MIN_SYNC_SECONDS, MAX_SYNC_SECONDS = 0.2, 300.0
HOLD_SECONDS = 2.0  # after a failed or early claim, before trying that schedule again
TIMEOUT_SECONDS = 10.0
MAX_BODY = 16 * 1024 * 1024


class BrainUnavailable(RuntimeError):
    """The brain did not answer as expected; the message says how (never the token)."""


def _parse_time(value: object) -> datetime | None:
    return datetime.fromisoformat(value) if isinstance(value, str) else None


@dataclass
class BrainEntry:
    id: str
    name: str
    task: str
    args: list[Any]
    kwargs: dict[str, Any]
    options: dict[str, Any]
    next_run_at: datetime | None
    hold_until: float = field(default=0.0, compare=False)

    @classmethod
    def from_wire(cls, item: dict[str, Any]) -> BrainEntry:
        return cls(
            str(item["id"]),
            str(item["name"]),
            str(item["task"]),
            list(item.get("args") or []),
            dict(item.get("kwargs") or {}),
            {k: v for k, v in (item.get("options") or {}).items() if k in ("queue",)},
            _parse_time(item.get("next_run_at")),
        )


class BrainClient:
    """The two requests of the beat, with the standard library and the agent's token."""

    def __init__(self, config: AgentConfig, timeout: float = TIMEOUT_SECONDS) -> None:
        self._config = config
        self._timeout = timeout

    def _request(
        self, path: str, body: dict[str, Any] | None = None, etag: str | None = None
    ) -> tuple[int, dict[str, Any], str | None]:
        headers = {"Authorization": f"Bearer {self._config.token}", "Accept": "application/json"}
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        if etag:
            headers["If-None-Match"] = etag
        # The URL is the configured brain's, checked to be http(s) by load_config.
        url = self._config.http_url(path)
        request = urllib.request.Request(url, data=data, headers=headers)  # noqa: S310
        try:
            with urllib.request.urlopen(request, timeout=self._timeout) as response:  # noqa: S310
                raw = response.read(MAX_BODY)
                return response.status, json.loads(raw) if raw else {}, response.headers.get("ETag")
        except urllib.error.HTTPError as exc:
            if exc.code == 304:
                return 304, {}, etag
            raise BrainUnavailable(f"{path} answered {exc.code}") from None
        except (OSError, ValueError) as exc:
            raise BrainUnavailable(f"{path}: {type(exc).__name__}") from None

    def schedules(self, etag: str | None) -> tuple[list[dict[str, Any]] | None, str | None]:
        """The schedules and their ETag; None for the list while it has not changed."""
        status, body, new_etag = self._request("/api/v1/agent/schedules", etag=etag)
        if status == 304:
            return None, etag
        return list(body.get("schedules") or []), new_etag

    def report(self, entries: list[dict[str, Any]]) -> dict[str, Any]:
        _status, body, _etag = self._request(
            "/api/v1/agent/schedules/report", {"schedules": entries}
        )
        return body

    def claim(self, schedule_id: str, slot: datetime, task_id: str) -> dict[str, Any]:
        _status, body, _etag = self._request(
            f"/api/v1/agent/schedules/{schedule_id}/claim",
            {"slot": slot.isoformat(), "task_id": task_id},
        )
        return body


def describe_entry(name: str, entry: dict[str, Any], zone: str) -> dict[str, Any] | None:
    """A ``beat_schedule`` entry as the brain's schedule, or None for a kind it has not (solar,
    custom schedule classes). A crontab keeps its fields as written, on the app's zone."""
    run = entry.get("schedule")
    if isinstance(run, crontab):
        fields = ("minute", "hour", "day_of_month", "month_of_year", "day_of_week")
        kind, expression = "cron", " ".join(str(getattr(run, f"_orig_{f}")) for f in fields)
    elif isinstance(run, interval_schedule | timedelta | int | float) and not isinstance(run, bool):
        every = run.run_every if isinstance(run, interval_schedule) else run
        seconds = every.total_seconds() if isinstance(every, timedelta) else float(every)
        kind, expression = "interval", str(max(1, math.ceil(seconds)))
    else:
        return None
    options = entry.get("options") or {}
    described = {"name": name, "task": entry.get("task"), "schedule_type": kind,
                 "expression": expression, "timezone": zone, "args": list(entry.get("args") or ()),
                 "kwargs": dict(entry.get("kwargs") or {})}  # fmt: skip
    if isinstance(options.get("queue"), str):
        described["queue"] = options["queue"]
    return described


def _sync_seconds(conf: Any) -> float:
    raw = os.environ.get("Z4J_BEAT_SYNC_SECONDS") or conf.get("z4j_beat_sync_seconds")
    try:
        value = float(raw) if raw not in (None, "") else DEFAULT_SYNC_SECONDS
    except (TypeError, ValueError):
        value = DEFAULT_SYNC_SECONDS
    return min(max(value, MIN_SYNC_SECONDS), MAX_SYNC_SECONDS)


class BrainScheduler(Scheduler):  # type: ignore[misc]  # celery has no type hints
    """Celery's ``Scheduler`` with the brain as its store; see the module's docstring."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._entries: dict[str, BrainEntry] = {}
        self._etag: str | None = None
        self._next_sync = 0.0
        self._client: BrainClient | None = None
        self._sync_every = DEFAULT_SYNC_SECONDS
        super().__init__(*args, **kwargs)

    def setup_schedule(self) -> None:
        self._client = BrainClient(load_config(celery_conf=self.app.conf))
        self._sync_every = _sync_seconds(self.app.conf)
        if self.app.conf.beat_schedule:
            self._report(self.app.conf.beat_schedule)
        self._refresh()

    def _report(self, beat_schedule: dict[str, Any]) -> None:
        """Hand the app's own ``beat_schedule`` to the brain, which keeps the entries it does not
        have yet; from then on they run from the brain like the others."""
        assert self._client is not None
        zone = str(self.app.conf.timezone or "UTC")
        entries: list[dict[str, Any]] = []
        skipped: list[str] = []
        for name, spec in beat_schedule.items():
            described = describe_entry(str(name), spec, zone)
            if described is None:
                skipped.append(str(name))
            else:
                entries.append(described)
        for name in skipped:
            logger.warning("z4j beat: %s: only crontab and interval schedules are taken", name)
        try:
            answer = self._client.report(entries)
        except BrainUnavailable as exc:
            logger.warning("z4j beat: the app's beat_schedule was not reported: %s", exc)
            return
        for bad in answer.get("rejected") or []:
            logger.warning("z4j beat: %s refused: %s %s", bad.get("name"), bad.get("field"),
                           bad.get("reason"))  # fmt: skip
        logger.info(
            "z4j beat: beat_schedule reported: %d new in the brain, %d kept as the brain has them",
            len(answer.get("created") or []), len(answer.get("existing") or []),
        )  # fmt: skip

    @property
    def info(self) -> str:
        # Asked before setup_schedule (celery beat's banner builds a lazy scheduler).
        return f"    . schedules -> z4j brain, synced every {_sync_seconds(self.app.conf):g} s"

    def _refresh(self) -> None:
        assert self._client is not None
        self._next_sync = time.monotonic() + self._sync_every
        try:
            found, self._etag = self._client.schedules(self._etag)
        except BrainUnavailable as exc:
            logger.warning("z4j beat: cannot read the schedules: %s", exc)
            return
        if found is None:
            return
        entries = {}
        for item in found:
            entry = BrainEntry.from_wire(item)
            previous = self._entries.get(entry.id)
            if previous is not None and previous.next_run_at == entry.next_run_at:
                entry.hold_until = previous.hold_until
            entries[entry.id] = entry
        added = entries.keys() - self._entries.keys()
        removed = self._entries.keys() - entries.keys()
        if added or removed:
            logger.info("z4j beat: %d schedules (%d new, %d gone)", len(entries), len(added),
                        len(removed))  # fmt: skip
        self._entries = entries

    def tick(self, *args: Any, **kwargs: Any) -> float:
        """Fire what is due; answer the seconds to sleep until the next due run or sync."""
        if time.monotonic() >= self._next_sync:
            self._refresh()
        wait = max(self._next_sync - time.monotonic(), 0.0)
        for entry in list(self._entries.values()):
            if entry.next_run_at is None:
                continue
            if entry.hold_until <= time.monotonic() and entry.next_run_at <= datetime.now(UTC):
                self._fire(entry)
            held = entry.hold_until - time.monotonic()
            if held > 0:
                wait = min(wait, held)
            elif entry.next_run_at is not None:
                wait = min(wait, max((entry.next_run_at - datetime.now(UTC)).total_seconds(), 0))
        return float(min(max(wait, 0.05), self.max_interval))

    def _fire(self, entry: BrainEntry) -> None:
        assert self._client is not None
        assert entry.next_run_at is not None
        slot, task_id = entry.next_run_at, str(uuid.uuid4())
        try:
            answer = self._client.claim(entry.id, slot, task_id)
        except BrainUnavailable as exc:
            logger.warning("z4j beat: %s not sent, the claim failed: %s", entry.name, exc)
            entry.hold_until = time.monotonic() + HOLD_SECONDS
            return
        entry.next_run_at = _parse_time(answer.get("next_run_at"))
        if answer.get("skipped"):
            logger.info(
                "z4j beat: %s at %s skipped: its last run has not finished", entry.name, slot
            )
            return
        if not answer.get("claimed"):
            if entry.next_run_at == slot:  # not come yet on the brain's clock
                entry.hold_until = time.monotonic() + HOLD_SECONDS
            logger.info("z4j beat: %s at %s was claimed elsewhere or moved", entry.name, slot)
            return
        entry.hold_until = 0.0
        logger.info("Scheduler: Sending due task %s (%s) id=%s", entry.name, entry.task, task_id)
        try:
            self.app.send_task(
                entry.task, args=entry.args, kwargs=entry.kwargs, task_id=task_id, **entry.options
            )
        except Exception:
            # The slot is spent either way: sending it again could run it twice.
            logger.exception("z4j beat: %s claimed but not sent", entry.name)
