"""The commands the agent carries out for Celery, by the z4j agents' action names.

Each handler takes the ``command`` frame's payload (``action``, ``target``, ``parameters``)
and returns the result object, or raises ``CommandFailed`` (or anything else) with the reason
the brain records. They run in a thread of the transport, never in a task.

Retry never replays the brain's copy of the arguments: that copy is redacted. Like the
z4j-celery agent, the agent re-sends the task with the arguments Celery's result backend kept
(``result_extended = True``), or with the operator's explicit ``override_args`` /
``override_kwargs``; without either it refuses.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

CONTROL_TIMEOUT = 5.0
Handler = Callable[[dict[str, Any]], dict[str, Any]]


class CommandFailed(Exception):
    """The command could not be carried out; the message says why."""


def _parameters(payload: dict[str, Any]) -> dict[str, Any]:
    value = payload.get("parameters")
    return value if isinstance(value, dict) else {}


def _target(payload: dict[str, Any]) -> dict[str, Any]:
    value = payload.get("target")
    return value if isinstance(value, dict) else {}


def _text(payload: dict[str, Any], *names: str) -> str:
    parameters, target = _parameters(payload), _target(payload)
    for name in names:
        for source in (parameters, target):
            value = source.get(name)
            if isinstance(value, str) and value:
                return value
    raise CommandFailed(f"{names[0]} required")


def _replies(replies: Any, what: str) -> dict[str, Any]:
    """Celery control replies ([{node: answer}]) as one object; no reply is a failure."""
    merged: dict[str, Any] = {}
    for reply in replies or []:
        if isinstance(reply, dict):
            merged.update(reply)
    if not merged:
        raise CommandFailed(f"no worker answered the {what} request")
    errors = {
        node: a["error"] for node, a in merged.items() if isinstance(a, dict) and "error" in a
    }
    if errors:
        raise CommandFailed(f"{what} refused: {errors}")
    return {"replies": merged}


def celery_handlers(app: Any) -> dict[str, Handler]:
    """The handlers for ``app``; the agent advertises exactly these names.

    Each remote-control call gets a broker connection of its own: the handlers run in the
    transport's thread, and a pooled connection may be in use by the worker's main thread
    (kombu connections are not thread-safe; on RabbitMQ sharing one resets it)."""

    def control(method: str, *args: Any, **kwargs: Any) -> Any:
        destination = kwargs.get("destination")
        if kwargs.get("reply") and destination:
            # Stop waiting once every addressed node answered, not at the timeout.
            kwargs["limit"] = len(destination)
        with app.connection_for_write() as connection:
            return getattr(app.control, method)(*args, connection=connection, **kwargs)

    def retry_task(payload: dict[str, Any]) -> dict[str, Any]:
        task_id = _text(payload, "task_id", "id")
        parameters = _parameters(payload)
        args, kwargs = parameters.get("override_args"), parameters.get("override_kwargs")
        name = parameters.get("task_name")
        queue = parameters.get("queue")
        if args is None and kwargs is None:
            stored = app.AsyncResult(task_id)
            args, kwargs = stored.args, stored.kwargs
            if args is None and kwargs is None:
                raise CommandFailed(
                    f"cannot retry {task_id}: the result backend kept no arguments (enable "
                    "result_extended) and no override_args/override_kwargs were given"
                )
            name = name or stored.name
            queue = queue or stored.queue
        if not isinstance(name, str) or not name:
            raise CommandFailed(f"cannot retry {task_id}: its task name is unknown")
        if not isinstance(args, list | tuple) or not isinstance(kwargs, dict | None):
            raise CommandFailed("override_args must be a list and override_kwargs an object")
        options = {"queue": queue} if isinstance(queue, str) and queue else {}
        with app.connection_for_write() as connection:
            sent = app.send_task(
                name, args=list(args), kwargs=dict(kwargs or {}), connection=connection, **options
            )
        return {"new_task_id": str(sent.id), "task_name": name}

    def cancel_task(payload: dict[str, Any]) -> dict[str, Any]:
        task_id = _text(payload, "task_id", "id")
        parameters = _parameters(payload)
        terminate = parameters.get("terminate") is True
        signal = (
            parameters.get("signal")
            if parameters.get("signal") in ("SIGTERM", "SIGKILL")
            else "SIGTERM"
        )
        control("revoke", task_id, terminate=terminate, signal=signal)
        return {"task_id": task_id, "terminated": terminate}

    def purge_queue(payload: dict[str, Any]) -> dict[str, Any]:
        queue = _text(payload, "queue", "id")
        expected = _parameters(payload).get("expected_depth")
        with app.connection_for_write() as connection:
            channel = connection.default_channel
            if isinstance(expected, int) and not isinstance(expected, bool):
                # The operator confirmed a depth: purge only what they saw.
                depth = channel.queue_declare(queue, passive=True).message_count
                if depth != expected:
                    raise CommandFailed(
                        f"{queue} holds {depth} messages, not the {expected} confirmed"
                    )
            purged = channel.queue_purge(queue)
        return {"queue": queue, "purged": int(purged or 0)}

    def _destination(payload: dict[str, Any], required: bool) -> list[str] | None:
        try:
            return [_text(payload, "worker_name", "id")]
        except CommandFailed:
            if required:
                raise
            return None

    def rate_limit(payload: dict[str, Any]) -> dict[str, Any]:
        task_name, rate = _text(payload, "task_name"), _text(payload, "rate")
        replies = control(
            "rate_limit",
            task_name,
            rate,
            destination=_destination(payload, False),
            reply=True,
            timeout=CONTROL_TIMEOUT,
        )
        return {"task_name": task_name, "rate": rate, **_replies(replies, "rate_limit")}

    def _pool(method: str) -> Handler:
        def handler(payload: dict[str, Any]) -> dict[str, Any]:
            delta = _parameters(payload).get("delta", 1)
            if not isinstance(delta, int) or isinstance(delta, bool) or not 1 <= delta <= 64:
                raise CommandFailed("delta is an integer from 1 to 64")
            replies = control(
                method,
                delta,
                destination=_destination(payload, True),
                reply=True,
                timeout=CONTROL_TIMEOUT,
            )
            return {"delta": delta, **_replies(replies, method)}

        return handler

    def restart_worker(payload: dict[str, Any]) -> dict[str, Any]:
        # Restarts the pool's processes (the worker's own remote control command; the worker
        # must run with worker_pool_restarts = True). The worker process itself keeps running.
        replies = control(
            "pool_restart",
            destination=_destination(payload, True),
            reply=True,
            timeout=CONTROL_TIMEOUT,
        )
        return _replies(replies, "pool_restart")

    def inspect_workers(payload: dict[str, Any]) -> dict[str, Any]:
        with app.connection_for_write() as connection:
            inspect = app.control.inspect(timeout=CONTROL_TIMEOUT / 2, connection=connection)
            stats, active = inspect.stats() or {}, inspect.active() or {}
        workers = []
        for node, info in sorted(stats.items()):
            pool = info.get("pool") if isinstance(info.get("pool"), dict) else {}
            total = info.get("total") if isinstance(info.get("total"), dict) else {}
            workers.append(
                {
                    "worker": node,
                    # "celery.concurrency.prefork:TaskPool" -> "prefork"
                    "pool": str(pool.get("implementation") or "").split(":")[0].rsplit(".")[-1]
                    or None,
                    "concurrency": pool.get("max-concurrency"),
                    "processes": len(pool.get("processes") or []),
                    "active": len(active.get(node) or []),
                    "processed": sum(v for v in total.values() if isinstance(v, int)),
                    "uptime": info.get("uptime"),
                }
            )
        return {"workers": workers}

    def inspect_queues(payload: dict[str, Any]) -> dict[str, Any]:
        with app.connection_for_write() as connection:
            inspect = app.control.inspect(timeout=CONTROL_TIMEOUT / 2, connection=connection)
            consumers: dict[str, int] = {}
            for queues in (inspect.active_queues() or {}).values():
                for queue in queues or []:
                    name = queue.get("name") if isinstance(queue, dict) else None
                    if isinstance(name, str):
                        consumers[name] = consumers.get(name, 0) + 1
        names = set(consumers) | {str(app.conf.task_default_queue)}
        found = []
        # A connection of its own (the inspect leaves its reply consumer on the other), and a
        # channel per queue: AMQP closes a channel whose passive declare finds no queue.
        with app.connection_for_read() as connection:
            for name in sorted(names):
                channel = connection.channel()
                try:
                    depth: int | None = channel.queue_declare(name, passive=True).message_count
                except Exception:
                    # Not found. Redis keeps a queue as a list, which does not exist while
                    # empty: a queue workers consume is then empty; any other has no depth.
                    depth = 0 if consumers.get(name) else None
                finally:
                    with contextlib.suppress(Exception):
                        channel.close()
                found.append({"queue": name, "depth": depth, "consumers": consumers.get(name, 0)})
        return {"queues": found}

    return {
        "inspect_queues": inspect_queues,
        "inspect_workers": inspect_workers,
        "retry_task": retry_task,
        "cancel_task": cancel_task,
        "purge_queue": purge_queue,
        "rate_limit": rate_limit,
        "pool_grow": _pool("pool_grow"),
        "pool_shrink": _pool("pool_shrink"),
        "restart_worker": restart_worker,
    }
