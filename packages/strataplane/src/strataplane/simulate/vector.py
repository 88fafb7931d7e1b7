"""Simulated Vector instances, behaving as Vector 0.57 with the ``http`` provider does
(src/providers/http.rs, src/app.rs, src/topology/controller.rs):

- start-up: GET the provider URL with the bootstrap file's ``request.headers`` and
  ``User-Agent: Vector/<v>``; the status code is not looked at: a body that does not load as
  TOML fails the start (a supervisor restarting it is modelled by ``retries``);
- ``interpolate_env``: ``$$`` is ``$``, ``$VAR`` and ``${VAR}`` come from the environment
  (src/config/vars.rs; here on the parsed values);
- every ``poll_interval`` (first one interval after start) a full GET; a body that does not
  load (not TOML, an unknown component type: Vector's serde refuses it) is dropped without a
  word and the old configuration keeps running; a loaded one is always handed to the reload:
  - a changed global option: ``Config reload rejected due to non-reloadable global options.``
    and ``Reload was not successful.`` (``reason = "global_options_changed"``), logged at
    ERROR on every poll, the old configuration keeps running;
  - a configuration that fails to build (a sink input naming nothing, a ``remap`` program that
    does not compile: here unbalanced delimiters stand in for VRL's compiler): ``Configuration
    error.``, the old configuration keeps running;
  - otherwise the new configuration runs (components that did not change are not touched);
- the rendered heartbeat pipeline: every ``scrape_interval_secs`` of its ``internal_metrics``
  the ``http`` sink POSTs newline-delimited JSON (``build_info``, ``uptime_seconds`` and the
  WARN/ERROR log events since the last send) with its ``request.headers`` and bearer token,
  from the configuration that runs.

Many instances run in one process on a shared ``HttpPool``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import time
import tomllib
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import lru_cache
from typing import Any
from urllib.parse import urlsplit

from strataplane.domain.vector_components import COMPONENT_TYPES, GLOBAL_OPTIONS

__all__ = ["SimulatedVector", "build_error", "load"]

_VAR = re.compile(r"\$\$|\$([A-Za-z0-9_.]+)|\$\{([A-Za-z0-9_.]+)\}")
_PAIRS = {")": "(", "]": "[", "}": "{"}
GLOBAL_REJECTED = "Config reload rejected due to non-reloadable global options."
SINK = "strataplane_heartbeat"


@lru_cache(maxsize=256)
def load(body: bytes) -> dict[str, Any] | None:
    """The configuration as Vector's loader reads it, None when it refuses it (not TOML, an
    unknown component type): once per distinct body."""
    try:
        parsed = tomllib.loads(body.decode())
    except (UnicodeDecodeError, tomllib.TOMLDecodeError):
        return None
    for section, known in COMPONENT_TYPES.items():
        components = parsed.get(section, {})
        if not isinstance(components, dict):
            return None
        for options in components.values():
            if not isinstance(options, dict) or options.get("type") not in known:
                return None
    return parsed


def _compiles(program: str) -> bool:
    stack: list[str] = []
    quoted = False
    for ch in program:
        if ch == '"':
            quoted = not quoted
        elif quoted:
            continue
        elif ch in "([{":
            stack.append(ch)
        elif ch in _PAIRS and (not stack or stack.pop() != _PAIRS[ch]):
            return False
    return not stack and not quoted


def build_error(config: dict[str, Any]) -> str | None:
    """Why the loaded configuration fails to build, None when it builds."""
    ids = {n for s in COMPONENT_TYPES for n in config.get(s, {})}
    for name, sink in config.get("sinks", {}).items():
        for item in sink.get("inputs", []):
            if "*" not in str(item) and item not in ids:
                return f'Input "{item}" for sink "{name}" doesn\'t match any components.'
    for name, transform in config.get("transforms", {}).items():
        if transform.get("type") == "remap" and not _compiles(str(transform.get("source", ""))):
            return f'Transform "{name}": the remap program does not compile.'
    return None


def _globals(config: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in config.items() if k in GLOBAL_OPTIONS}


@dataclass
class SimulatedVector:
    pool: Any  # HttpPool
    config_path: str
    env: dict[str, str]
    version: str = "0.57.0"
    poll_interval: float = 30.0
    retry_delay: float = 1.0
    retries: int = 3
    state: str = "new"  # running, exited
    reloads: int = 0
    rejected: int = 0
    polls: int = 0  # GETs after the start
    config_hash: str | None = None
    exit_reason: str | None = None
    latencies: list[float] = field(default_factory=list)
    running: dict[str, Any] | None = None
    _body: bytes | None = None
    _logs: list[dict[str, Any]] = field(default_factory=list)
    _started: float = 0.0
    _heartbeat: asyncio.Task[None] | None = None

    def _headers(self) -> dict[str, str]:
        return {
            "Authorization": f"Bearer {self.env.get('STRATAPLANE_VECTOR_TOKEN', '')}",
            "User-Agent": f"Vector/{self.version} (x86_64-unknown-linux-gnu)",
        }

    async def _timed(
        self, method: str, path: str, headers: dict[str, str], body: bytes = b""
    ) -> Any:
        started = time.perf_counter()
        reply = await self.pool.request(method, path, headers, body)
        self.latencies.append(time.perf_counter() - started)
        return reply

    def _variable(self, m: re.Match[str]) -> str:
        name = m.group(1) or m.group(2)
        return "$" if name is None else self.env.get(name, "")

    def _substitute(self, value: Any) -> Any:
        if isinstance(value, str):
            return _VAR.sub(self._variable, value) if "$" in value else value
        if isinstance(value, dict):
            return {k: self._substitute(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self._substitute(v) for v in value]
        return value

    def _log(self, message: str, **fields: Any) -> None:
        event = {
            "message": message,
            "metadata": {"level": "ERROR", "kind": "event", "module_path": "vector::topology"},
            "host": self.env.get("HOSTNAME", "sim"),
            "source_type": "internal_logs",
            "timestamp": datetime.now(UTC).isoformat(),
            **fields,
        }
        self._logs = [*self._logs, event][-100:]

    async def _get(self) -> bytes | None:
        try:
            reply = await self._timed("GET", self.config_path, self._headers())
        except OSError:
            return None
        return bytes(reply.body)  # whatever the status: Vector does not look at it

    async def run(self) -> None:
        """Start, then poll and reload until cancelled or the start fails."""
        try:
            if await self._start():
                await self._poll()
        finally:
            await self._stop_heartbeat()

    async def _start(self) -> bool:
        for attempt in range(self.retries):
            body = await self._get()
            config = load(body) if body is not None else None
            if config is not None and build_error(config) is None:
                self._started = time.monotonic()
                self._apply(body, config)  # type: ignore[arg-type]
                return True
            if attempt + 1 < self.retries:
                await asyncio.sleep(self.retry_delay)
        self.state, self.exit_reason = "exited", "the configuration did not load at start-up"
        return False

    def _apply(self, body: bytes, config: dict[str, Any]) -> None:
        self._body, self.running, self.state = body, self._substitute(config), "running"
        sink = self.running.get("sinks", {}).get(SINK)
        headers = sink.get("request", {}).get("headers", {}) if isinstance(sink, dict) else {}
        self.config_hash = headers.get("X-Strataplane-Config-Hash")
        if self._heartbeat is None and sink is not None:
            self._heartbeat = asyncio.create_task(self._beat())

    def reload(self, body: bytes) -> None:
        """What one poll's answer does to the running configuration."""
        config = load(body)
        if config is None or self.running is None:
            return  # the provider drops a body that does not load, silently
        if body == self._body:
            return  # the diff is empty: nothing is rebuilt
        if _globals(self._substitute(config)) != _globals(self.running):
            self.rejected += 1
            changed = sorted(set(_globals(config)) ^ set(_globals(self.running))) or ["..."]
            self._log(GLOBAL_REJECTED, changed_fields=", ".join(changed))
            self._log("Reload was not successful.", reason="global_options_changed")
            return
        if (why := build_error(config)) is not None:
            self.rejected += 1
            self._log("Configuration error.", error=why)
            return
        self.reloads += 1
        self._apply(body, config)

    async def _poll(self) -> None:
        while True:
            await asyncio.sleep(self.poll_interval)
            body = await self._get()
            self.polls += 1
            if body is not None:
                self.reload(body)

    def _sink(self) -> dict[str, Any]:
        assert self.running is not None
        found: dict[str, Any] = self.running["sinks"][SINK]
        return found

    def _interval(self) -> float:
        assert self.running is not None
        source = self.running.get("sources", {}).get("strataplane_metrics", {})
        return float(source.get("scrape_interval_secs", 1.0))

    async def _beat(self) -> None:
        while True:
            await asyncio.sleep(self._interval())
            sink = self._sink()
            host = self.env.get("HOSTNAME", "sim")
            now = datetime.now(UTC).isoformat()
            metrics = [
                {
                    "name": "build_info",
                    "namespace": "vector",
                    "tags": {"version": self.version, "host": host},
                    "timestamp": now,
                    "kind": "absolute",
                    "gauge": {"value": 1.0},
                },
                {
                    "name": "uptime_seconds",
                    "namespace": "vector",
                    "tags": {"host": host},
                    "timestamp": now,
                    "kind": "absolute",
                    "gauge": {"value": round(time.monotonic() - self._started, 3)},
                },
            ]
            logs, self._logs = self._logs, []
            body = "\n".join(json.dumps(e) for e in [*metrics, *logs]).encode() + b"\n"
            headers = {
                "Content-Type": "application/x-ndjson",
                **sink.get("request", {}).get("headers", {}),
                "Authorization": f"Bearer {sink.get('auth', {}).get('token', '')}",
            }
            sent = False
            with contextlib.suppress(OSError):
                target = urlsplit(str(sink["uri"])).path
                reply = await self._timed("POST", target, headers, body)
                sent = 200 <= reply.status < 300
            if not sent:
                self._logs = [*logs, *self._logs][-100:]

    async def _stop_heartbeat(self) -> None:
        if self._heartbeat is not None:
            self._heartbeat.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._heartbeat
            self._heartbeat = None
