"""Task events from Celery's signals, wherever they fire: the producer, the worker's main
process, or the process that runs the task. Handlers only read Celery's objects and record; the
agent makes recording safe (it never raises into the task).
"""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime
from typing import Any

from z4j_agent.agent import Agent
from z4j_agent.celery_data import (
    context_data,
    exception_info,
    mask_positional,
    message_task_id,
    published,
    request_data,
    short_repr,
    traceback_text,
)


class TaskCapture:
    """The task-signal receivers; ``_started`` holds start times of tasks running here, and
    ``_publishing`` the (task id, moment) of the message this thread is publishing."""

    app: Any
    agent: Agent
    _started: dict[str, float]
    _publishing: threading.local

    def _extra(self) -> tuple[str, ...]:
        return self.agent.config.redact_keys if self.agent.enabled else ()

    # Producer side. A worker may receive and start the task before the broker's answer reaches
    # the publisher, so the event is stamped when publishing begins: ``task_sent`` then never
    # follows ``started`` on one clock. Both signals fire in the publishing thread, one pair at a
    # time, so a thread-local slot holds the moment and nothing outlives a failed publish.
    def on_before_publish(self, headers: Any = None, body: Any = None, **_: Any) -> None:
        self._publishing.sent = (message_task_id(body, headers), datetime.now(UTC))

    def on_published(
        self,
        sender: Any = None,
        body: Any = None,
        headers: Any = None,
        exchange: Any = None,
        routing_key: Any = None,
        **_: Any,
    ) -> None:
        task_id, data = published(sender, body, headers, exchange, routing_key)
        # Only a finalized app's registry is read: ``app.tasks`` would finalize it otherwise.
        task = self.app.tasks.get(data["task_name"]) if self.app.finalized else None
        data["args"] = mask_positional(task, data["args"], self._extra())
        began_id, began_at = getattr(self._publishing, "sent", (None, None))
        self._publishing.sent = (None, None)
        occurred_at = began_at if task_id is not None and began_id == task_id else None
        self.agent.record("task.sent", task_id, data, occurred_at)

    # Worker main process.
    def on_received(self, request: Any = None, **_: Any) -> None:
        data = request_data(request)
        data["args"] = mask_positional(getattr(request, "task", None), data["args"], self._extra())
        self.agent.record("task.received", getattr(request, "id", None), data)

    def on_revoked(
        self,
        sender: Any = None,
        request: Any = None,
        terminated: Any = None,
        signum: Any = None,
        expired: Any = None,
        **_: Any,
    ) -> None:
        data = context_data(request, getattr(sender, "name", None))
        reason = "expired" if expired else "terminated" if terminated else "revoked"
        data.update(
            reason=reason,
            terminated=bool(terminated),
            expired=bool(expired),
            signum=None if signum is None else int(signum),
        )
        self.agent.record("task.revoked", getattr(request, "id", None), data)

    def on_rejected(self, message: Any = None, exc: Any = None, **_: Any) -> None:
        headers = getattr(message, "headers", None) or {}
        self.agent.record(
            "task.rejected",
            headers.get("id"),
            {
                "task_name": headers.get("task"),
                "exception": exception_info(exc),
                "reason": "invalid message",
            },
        )

    def on_unknown(self, name: Any = None, id: Any = None, exc: Any = None, **_: Any) -> None:
        self.agent.record(
            "task.rejected",
            id,
            {
                "task_name": name,
                "reason": "unknown task",
                "exception": exception_info(exc) or {"type": "NotRegistered", "message": str(name)},
            },
        )

    # Wherever the task runs.
    def _task(self, task: Any) -> dict[str, Any]:
        return context_data(getattr(task, "request", None), getattr(task, "name", None))

    def _runtime_ms(self, task_id: Any, runtime: Any = None) -> float | None:
        if isinstance(runtime, int | float):
            return round(runtime * 1000, 3)
        started = self._started.get(str(task_id))
        return None if started is None else round((time.monotonic() - started) * 1000, 3)

    def on_prerun(
        self, task_id: Any = None, task: Any = None, args: Any = None, kwargs: Any = None, **_: Any
    ) -> None:
        self._started[str(task_id)] = time.monotonic()
        args = mask_positional(task, args, self._extra())
        self.agent.record(
            "task.started", task_id, {**self._task(task), "args": args, "kwargs": kwargs}
        )

    def on_postrun(self, task_id: Any = None, **_: Any) -> None:
        self._started.pop(str(task_id), None)

    def on_success(
        self, sender: Any = None, result: Any = None, runtime: Any = None, **_: Any
    ) -> None:
        task_id = getattr(getattr(sender, "request", None), "id", None)
        self.agent.record(
            "task.succeeded",
            task_id,
            {
                **self._task(sender),
                "result": short_repr(result),
                "runtime_ms": self._runtime_ms(task_id, runtime),
            },
        )

    def on_failure(
        self,
        sender: Any = None,
        task_id: Any = None,
        exception: Any = None,
        einfo: Any = None,
        **_: Any,
    ) -> None:
        self.agent.record(
            "task.failed",
            task_id,
            {
                **self._task(sender),
                "exception": exception_info(exception),
                "traceback": traceback_text(einfo, exception),
                "runtime_ms": self._runtime_ms(task_id),
            },
        )

    def on_retry(
        self,
        sender: Any = None,
        request: Any = None,
        reason: Any = None,
        einfo: Any = None,
        **_: Any,
    ) -> None:
        cause = getattr(reason, "exc", None)
        data = context_data(request, getattr(sender, "name", None))
        data.update(
            exception=exception_info(cause if isinstance(cause, BaseException) else None),
            reason=str(reason)[:1000] if reason is not None else None,
            traceback=traceback_text(einfo, cause if isinstance(cause, BaseException) else None),
            runtime_ms=self._runtime_ms(getattr(request, "id", None)),
        )
        self.agent.record("task.retried", getattr(request, "id", None), data)
