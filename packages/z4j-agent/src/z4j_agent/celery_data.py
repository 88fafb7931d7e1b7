"""Event data from Celery's objects: published messages, worker requests and task contexts.

Duck-typed on purpose (no Celery import), so it works across Celery 5.x and message protocols
1 and 2, and reading an attribute that a version lacks yields null instead of an error.
"""

from __future__ import annotations

import functools
import inspect
import traceback as tb
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from z4j_agent.events import utc_iso
from z4j_agent.redaction import REDACTED, is_sensitive_key

RESULT_REPR_LIMIT = 2048


def iso(value: Any) -> str | None:
    """An ETA or expiry as ISO text: Celery passes datetimes, ISO strings or nothing."""
    if value is None or value == "":
        return None
    if isinstance(value, datetime):
        return utc_iso(value) if value.tzinfo else value.isoformat(timespec="microseconds")
    return str(value)


def short_repr(value: Any, limit: int = RESULT_REPR_LIMIT) -> str:
    try:
        text = repr(value)
    except Exception:  # a broken __repr__ must not break the event
        text = f"<unrepresentable {type(value).__name__}>"
    return text if len(text) <= limit else text[: limit - 15] + " ...[truncated]"


def exception_info(exc: BaseException | None) -> dict[str, str] | None:
    if exc is None:
        return None
    cls = type(exc)
    name = cls.__qualname__
    if cls.__module__ != "builtins":
        name = f"{cls.__module__}.{name}"
    return {"type": name, "message": str(exc)}


def traceback_text(einfo: Any, exc: BaseException | None) -> str | None:
    text = getattr(einfo, "traceback", None)
    if isinstance(text, str) and text:
        return text
    if exc is not None and exc.__traceback__ is not None:
        return "".join(tb.format_exception(exc))
    return None


@functools.lru_cache(maxsize=1024)
def _sensitive_positions(run: Any, extra: tuple[str, ...]) -> frozenset[int]:
    try:
        parameters = list(inspect.signature(run).parameters.values())
    except (TypeError, ValueError):
        return frozenset()
    positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    return frozenset(
        index
        for index, parameter in enumerate(p for p in parameters if p.kind in positional)
        if is_sensitive_key(parameter.name, extra)
    )


def mask_positional(task: Any, args: Any, extra: tuple[str, ...] = ()) -> Any:
    """Mask positional arguments bound to sensitive parameter names of the task's function:
    ``login.delay("bob", "hunter2")`` hides the second argument when it is ``password``."""
    run = getattr(task, "run", None)
    if run is None or not isinstance(args, list | tuple):
        return args
    try:
        positions = _sensitive_positions(run, extra)
    except TypeError:  # an unhashable callable: no names to go by
        return args
    return [REDACTED if i in positions else arg for i, arg in enumerate(args)]


def message_task_id(body: Any, headers: Any) -> str | None:
    """The task id of a published message: in its headers (protocol 2) or body (protocol 1)."""
    for part in (headers, body):
        if isinstance(part, Mapping) and part.get("id") is not None:
            return str(part["id"])
    return None


def published(
    sender: Any, body: Any, headers: Mapping[str, Any] | None, exchange: Any, routing_key: Any
) -> tuple[str | None, dict[str, Any]]:
    """(task_id, data) of a message ``after_task_publish`` reports."""
    info: dict[str, Any] = dict(headers or {})
    args: Any = None
    kwargs: Any = None
    if isinstance(body, tuple | list) and len(body) >= 2:  # protocol 2: (args, kwargs, embed)
        args, kwargs = body[0], body[1]
    elif isinstance(body, Mapping):  # protocol 1 keeps everything in the body
        info = {**body, **info}
        args, kwargs = body.get("args"), body.get("kwargs")
    return message_task_id(body, headers), {
        "task_name": info.get("task") or sender,
        "queue": routing_key or None,
        "exchange": exchange or None,
        "args": args,
        "kwargs": kwargs,
        "retry_count": info.get("retries"),
        "parent_id": info.get("parent_id"),
        "root_id": info.get("root_id"),
        "group_id": info.get("group"),
        "eta": iso(info.get("eta")),
        "expires": iso(info.get("expires")),
    }


def request_data(request: Any) -> dict[str, Any]:
    """Data of a worker-side ``Request`` (``task_received``, in the worker's main process)."""
    delivery = getattr(request, "delivery_info", None) or {}
    request_dict = getattr(request, "request_dict", None) or {}
    return {
        "task_name": getattr(request, "name", None),
        "queue": delivery.get("routing_key"),
        "args": getattr(request, "args", None),
        "kwargs": getattr(request, "kwargs", None),
        "worker": getattr(request, "hostname", None),
        "retry_count": request_dict.get("retries"),
        "parent_id": getattr(request, "parent_id", None),
        "root_id": getattr(request, "root_id", None),
        "group_id": request_dict.get("group"),
        "eta": iso(getattr(request, "eta", None)),
        "expires": iso(getattr(request, "expires", None)),
    }


def context_data(context: Any, task_name: str | None) -> dict[str, Any]:
    """Data of a task ``Context`` (``task.request`` while it runs, or the revoked request)."""
    delivery = getattr(context, "delivery_info", None) or {}
    return {
        "task_name": task_name or getattr(context, "task", None),
        "queue": delivery.get("routing_key") if isinstance(delivery, Mapping) else None,
        "worker": getattr(context, "hostname", None),
        "retry_count": getattr(context, "retries", None),
        "parent_id": getattr(context, "parent_id", None),
        "root_id": getattr(context, "root_id", None),
        "group_id": getattr(context, "group", None),
        "eta": iso(getattr(context, "eta", None)),
        "expires": iso(getattr(context, "expires", None)),
    }
