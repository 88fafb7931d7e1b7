"""Simulated Telegraf instances, behaving as PROTOCOLS.md describes Telegraf 1.37+:

- start-up: GET the config URL (``Accept: application/toml``, ``User-Agent: Telegraf/<v>
  Go/<go>``, ``Authorization: Bearer`` from 1.39, ``Token`` before); only 200 succeeds; a few
  tries ``retry_delay`` apart, then the process exits;
- ``${VAR}`` substitution from its environment on the fetched TOML (here on the parsed values);
- the watcher: every ``watch_interval`` a HEAD with the same headers; the raw Last-Modified of
  the FIRST tick is the baseline, any different later value (even older) reloads; no
  Last-Modified never fires;
- reload = full stop and start with a fresh GET; a failed fetch or parse exits the process, and
  so does a configuration Telegraf's loader or a plugin's Init refuses (``telegraf_load``);
- ``outputs.heartbeat``: POST schema v1 every ``interval`` with its ``token`` as Bearer and its
  ``[outputs.heartbeat.headers]``, including statistics, logs and status.

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
from functools import lru_cache
from typing import Any
from urllib.parse import urlsplit

from strataplane.domain.spec.fields import parse_duration
from strataplane.simulate.http import HttpPool
from strataplane.simulate.telegraf_load import startup_error

_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


@lru_cache(maxsize=256)
def _parse(body: bytes) -> dict[str, Any] | None:
    """The fetched TOML, parsed once per distinct body: a fleet shares a few dozen bodies, and
    parsing each agent's copy would make the simulator, not the server, the bottleneck of a
    reload wave. Telegraf substitutes ``${VAR}`` before parsing; the values substituted here
    (tokens, ids) never hold TOML syntax, so substituting afterwards gives the same result."""
    try:
        return tomllib.loads(body.decode())
    except (UnicodeDecodeError, tomllib.TOMLDecodeError):
        return None


@lru_cache(maxsize=256)
def _refusal(body: bytes, version: str) -> str | None:
    """Why Telegraf would refuse this body, once per distinct (body, version)."""
    parsed = _parse(body)
    return None if parsed is None else startup_error(parsed, version)


@dataclass
class SimulatedTelegraf:
    pool: HttpPool
    config_path: str
    env: dict[str, str]
    version: str = "1.39.1"
    watch_interval: float = 10.0
    retry_delay: float = 1.0
    retries: int = 3
    state: str = "new"  # running, exited
    reloads: int = 0
    config_hash: str | None = None
    exit_reason: str | None = None
    baselines: list[str | None] = field(default_factory=list)
    latencies: list[float] = field(default_factory=list)
    statistics: dict[str, int] = field(
        default_factory=lambda: {"errors": 0, "warnings": 0, "metrics": 0}
    )
    _heartbeat: asyncio.Task[None] | None = None
    _config_headers: dict[str, str] = field(default_factory=dict)
    _refused: str | None = None

    def _headers(self) -> dict[str, str]:
        if not self._config_headers:
            new = tuple(int(p) for p in self.version.split(".")[:2]) >= (1, 39)
            token = self.env.get("TELEGRAF_CONTROLLER_TOKEN" if new else "INFLUX_TOKEN", "")
            self._config_headers = {
                "Accept": "application/toml",
                "User-Agent": f"Telegraf/{self.version} Go/1.24.4",
                "Authorization": f"Bearer {token}" if new else f"Token {token}",
            }
        return self._config_headers

    async def _timed(
        self, method: str, path: str, headers: dict[str, str], body: bytes = b""
    ) -> Any:
        started = time.perf_counter()
        reply = await self.pool.request(method, path, headers, body)
        self.latencies.append(time.perf_counter() - started)
        return reply

    async def _fetch(self) -> dict[str, Any] | None:
        for attempt in range(self.retries):
            try:
                reply = await self._timed("GET", self.config_path, self._headers())
            except OSError:
                reply = None
            if reply is not None and reply.status == 200:
                parsed = _parse(reply.body)
                self._refused = _refusal(reply.body, self.version)
                return None if parsed is None else self._substitute(parsed)
            if attempt + 1 < self.retries:
                await asyncio.sleep(self.retry_delay)
        return None

    def _substitute(self, value: Any) -> Any:
        """``${VAR}`` from the environment in every string of the parsed configuration."""
        if isinstance(value, str):
            return (
                _VAR.sub(lambda m: self.env.get(m.group(1), ""), value) if "${" in value else value
            )
        if isinstance(value, dict):
            return {k: self._substitute(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self._substitute(v) for v in value]
        return value

    async def run(self) -> None:
        """Start, then watch and reload until the process exits (or is cancelled)."""
        try:
            while await self._start():
                self.reloads += 1
        finally:
            await self._stop_heartbeat()

    async def _start(self) -> bool:
        """Run one configuration; True to reload, False when the process exited."""
        config = await self._fetch()
        if config is None:
            self.state, self.exit_reason = "exited", "config fetch or parse failed"
            return False
        if self._refused is not None:
            self.state, self.exit_reason = "exited", self._refused
            return False
        self.state = "running"
        beat = (config.get("outputs", {}).get("heartbeat") or [None])[0]
        self.config_hash = None
        if isinstance(beat, dict):
            self.config_hash = beat.get("headers", {}).get("X-Strataplane-Config-Hash")
            self._heartbeat = asyncio.create_task(self._beat(beat))
        try:
            return await self._watch()
        finally:
            await self._stop_heartbeat()

    async def _watch(self) -> bool:
        baseline: str | None = None
        first = True
        while True:
            await asyncio.sleep(self.watch_interval)
            try:
                reply = await self._timed("HEAD", self.config_path, self._headers())
            except OSError:
                continue
            value = reply.headers.get("last-modified")
            if first:
                baseline, first = value, False
                self.baselines.append(value)
            elif value is not None and value != baseline:
                return True

    async def _beat(self, options: dict[str, Any]) -> None:
        interval = (parse_duration(str(options.get("interval", "1m"))) or 60_000) / 1000
        target = urlsplit(str(options["url"])).path
        headers = {
            "Content-Type": "application/json",
            **options.get("headers", {}),
            "Authorization": f"Bearer {options.get('token', '')}",
        }
        last_failed: int | None = None
        while True:
            await asyncio.sleep(interval)
            body: dict[str, Any] = {
                "id": options.get("instance_id", ""),
                "version": f"Telegraf {self.version}",
                "schema": 1,
                "hostname": self.env.get("HOSTNAME", "sim"),
                "configurations": [self.config_path],
                "statistics": self.statistics,
                "logs": [],
                "status": "OK",
            }
            if last_failed is not None:
                body["last"] = last_failed
            with contextlib.suppress(OSError):
                reply = await self._timed("POST", target, headers, json.dumps(body).encode())
                if 200 <= reply.status < 300:
                    last_failed = None
                    self.statistics = {"errors": 0, "warnings": 0, "metrics": 0}
                    continue
            last_failed = int(time.time())

    async def _stop_heartbeat(self) -> None:
        if self._heartbeat is not None:
            self._heartbeat.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._heartbeat
            self._heartbeat = None
