"""The agent of one process: records events into the buffer and, where this process ships, owns
the transport. Framework integrations (``z4j_agent.celery``) drive it from their hooks.

Recording never raises into the application: a task must not fail because telemetry did. Every
object here survives ``fork``: the buffer reopens its connection in the child, and a transport
inherited from the parent (whose thread does not exist in the child) is discarded.
"""

from __future__ import annotations

import logging
import os
import threading
import weakref
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from z4j_agent.buffer import EventBuffer
from z4j_agent.config import AgentConfig, ConfigError
from z4j_agent.events import make_event
from z4j_agent.identity import ProcessIdentity
from z4j_agent.shipper import CommandHandler
from z4j_agent.transport import Transport

log = logging.getLogger("z4j_agent")

ConfigSource = AgentConfig | Callable[[], AgentConfig]


class Agent:
    """Records events of one process and, where that process ships, runs its transport.

    ``config`` may be a callable, resolved on first use: under ``install(app)`` the app's
    configuration is complete only once the worker starts.
    """

    def __init__(
        self,
        config: ConfigSource,
        *,
        engine: str = "celery",
        command_handlers: dict[str, CommandHandler] | None = None,
    ) -> None:
        self._config_source = config
        self._config: AgentConfig | None = config if isinstance(config, AgentConfig) else None
        self.engine = engine
        self.command_handlers = dict(command_handlers or {})
        self.buffer_name = "agent"
        # When set, the first event recorded in a process starts its transport (producers).
        self.auto_ship: Callable[[], ProcessIdentity] | None = None
        self.disabled_reason: str | None = None
        self._buffer: EventBuffer | None = None
        self._transport: Transport | None = None
        self._transport_pid = 0
        self._lock = threading.Lock()
        self._failures = 0
        # A thread of the parent may hold the lock at fork time: the child gets a fresh one.
        this = weakref.ref(self)
        os.register_at_fork(after_in_child=lambda: _reset_lock(this))

    @property
    def config(self) -> AgentConfig:
        if self._config is None:
            source = self._config_source
            self._config = source if isinstance(source, AgentConfig) else source()
        return self._config

    @property
    def enabled(self) -> bool:
        if self.disabled_reason is None:
            try:
                self.config  # noqa: B018 - resolving the config is the check
            except ConfigError as exc:
                self.disabled_reason = str(exc)
                log.error("z4j agent disabled: %s", exc)
        return self.disabled_reason is None

    def use_buffer(self, name: str) -> None:
        """Choose the buffer file of this process by name (see ``AgentConfig.buffer_file``)."""
        with self._lock:
            if name == self.buffer_name:
                return
            self.buffer_name = name
            self._buffer = None
            transport, self._transport = self.transport, None
        if transport is not None:  # it ships the previous file: the new owner starts its own
            transport.stop(0.5)

    @property
    def buffer(self) -> EventBuffer:
        with self._lock:
            if self._buffer is None:
                config = self.config
                self._buffer = EventBuffer(
                    config.buffer_file(self.buffer_name), config.buffer_max_events
                )
            return self._buffer

    @property
    def transport(self) -> Transport | None:
        return self._transport if self._transport_pid == os.getpid() else None

    def record(
        self,
        kind: str,
        task_id: str | None,
        data: Mapping[str, Any],
        occurred_at: datetime | None = None,
    ) -> None:
        """Buffer one event (stamped now unless ``occurred_at`` says when it happened); logs
        instead of raising when anything goes wrong."""
        try:
            if not self.enabled:
                return
            event = make_event(
                kind,
                task_id,
                data,
                engine=self.engine,
                redact_keys=self.config.redact_keys,
                occurred_at=occurred_at,
            )
            self.buffer.append([event])
            if self.auto_ship is not None and self.transport is None:
                self.start_transport(self.auto_ship())
        except Exception:  # telemetry must never fail the task
            self._failures += 1
            if self._failures == 1 or self._failures % 1000 == 0:
                log.exception(
                    "z4j agent could not record a %s event (%d failures)", kind, self._failures
                )

    def start_transport(self, identity: ProcessIdentity) -> None:
        """Start shipping from this process, once per process."""
        if not self.enabled:
            return
        with self._lock:
            if self._transport_pid == os.getpid() and self._transport is not None:
                return
            buffer = self._buffer or EventBuffer(
                self.config.buffer_file(self.buffer_name), self.config.buffer_max_events
            )
            self._buffer = buffer
            self._transport = Transport(
                self.config, buffer, identity, command_handlers=self.command_handlers
            )
            self._transport_pid = os.getpid()
            self._transport.start()

    def after_fork(self) -> None:
        """In a forked child that must not ship: forget the parent's transport."""
        with self._lock:
            self.auto_ship = None
            self._transport = None
            self._transport_pid = 0

    def stop(self, timeout: float = 5.0) -> None:
        """Flush what the transport can within ``timeout`` (best effort), then stop it."""
        transport = self.transport
        if transport is not None:
            transport.stop(timeout)
            with self._lock:
                self._transport = None
                self._transport_pid = 0


def _reset_lock(ref: weakref.ref[Agent]) -> None:
    agent = ref()
    if agent is not None:
        agent._lock = threading.Lock()
