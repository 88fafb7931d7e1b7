"""Who is connecting: the process identity that the ``hello`` frame announces to the brain."""

from __future__ import annotations

import os
import platform
import socket
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from z4j_agent.events import utc_iso
from z4j_agent.protocol import MAX_ACTIVE_TASKS, PROTOCOL_VERSION

AGENT_VERSION = "0.1.0"
CELERY_CAPABILITIES = ("events.task", "events.worker")


@dataclass(frozen=True)
class ProcessIdentity:
    """``worker_id`` is stable across restarts (the Celery node name for a worker), so the
    brain can replace the session of a worker that restarted; ``worker_role`` is ``task`` for
    a Celery worker and ``producer`` for any other process that only sends tasks."""

    worker_id: str
    worker_role: str
    framework: str = "celery"
    engines: tuple[str, ...] = ("celery",)
    capabilities: tuple[str, ...] = CELERY_CAPABILITIES
    hostname: str = field(default_factory=socket.gethostname)
    pid: int = field(default_factory=os.getpid)
    started_at: str = field(default_factory=utc_iso)
    framework_version: str | None = None
    # The engine task ids running in this worker now; None where the process runs no tasks.
    active_tasks: Callable[[], list[str]] | None = field(default=None, compare=False)


def active_tasks_field(identity: ProcessIdentity) -> dict[str, Any]:
    """``{"active_tasks": [...]}`` for a hello or heartbeat, or nothing when this process
    cannot tell (a producer, a failing probe, more than the protocol's bound)."""
    if identity.active_tasks is None:
        return {}
    try:
        active = identity.active_tasks()
    except Exception:  # a probe of the worker's state must never break the session
        return {}
    return {"active_tasks": active} if len(active) <= MAX_ACTIVE_TASKS else {}


def hello_payload(identity: ProcessIdentity) -> dict[str, Any]:
    return {
        "protocol_version": str(PROTOCOL_VERSION),
        "agent_version": AGENT_VERSION,
        "framework": identity.framework,
        "engines": list(identity.engines),
        "schedulers": [],
        "capabilities": {engine: list(identity.capabilities) for engine in identity.engines},
        "host": {
            "hostname": identity.hostname,
            "platform": platform.platform(),
            "python": platform.python_version(),
            "framework_version": identity.framework_version,
        },
        "worker_id": identity.worker_id,
        "worker_role": identity.worker_role,
        "worker_pid": identity.pid,
        "worker_started_at": identity.started_at,
        **active_tasks_field(identity),
    }
