"""Simulated Telegraf instances, behaving as PROTOCOLS.md describes Telegraf 1.37+:

- start-up: GET the config URL (``Accept: application/toml``, ``User-Agent: Telegraf/<v>
  Go/<go>``, ``Authorization: Bearer`` from 1.39, ``Token`` before); only 200 succeeds; a few
  tries ``retry_delay`` apart, then the process exits (and its service manager starts it again
  ``restart_after`` seconds later, when set);
- ``${VAR}`` substitution from its environment on the fetched TOML (here on the parsed values);
- the watcher: every ``watch_interval`` a HEAD with the same headers; the raw Last-Modified of
  the FIRST tick is the baseline, any different later value (even older) reloads; no
  Last-Modified never fires;
- reload = full stop and start with a fresh GET; a failed fetch or parse exits the process, and
  so does a configuration Telegraf's loader or a plugin's Init refuses (``telegraf_load``);
- ``secretstores.http``: at every (re)start, one GET of the store's URL per ``@{id:key}``
  reference (``LinkSecrets`` calls ``GetResolver`` per reference, and each downloads), with
  ``Authorization: Bearer <token>`` and its ``headers``; only its ``success_status_codes``
  (default 200) succeed; the body must be one JSON object of string values (merged into the
  store's cache); a key the cache lacks fails linking ("not found") and the process exits.
  Every string holding a reference counts as a secret field here (Telegraf resolves only the
  options a plugin declares as secrets);
- ``outputs.heartbeat``: POST schema v1 every ``interval`` with its ``token`` as Bearer and its
  ``[outputs.heartbeat.headers]``, including statistics, logs and status;
- ``tls_ca``, ``tls_cert``, ``tls_key`` on the heartbeat or the secret store: that plugin's
  requests go over TLS to its URL's origin, trusting ``tls_ca`` (else the system's CAs) and
  presenting the client certificate; the config fetch never does (Go's default client);
- gathering: an input whose ``urls`` name a host in ``unreachable`` (a host this machine
  cannot reach) logs an error on each gather, so its heartbeats count errors while the process
  runs on; one gather per heartbeat interval is counted.

Many instances run in one process on a shared ``HttpPool``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import ssl
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
_SECRET_REF = re.compile(r"@\{(\w+):(\w+)\}")


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
    # A service manager's restart (systemd's Restart=always, RestartSec): seconds after an
    # exit the process starts again; None leaves it exited.
    restart_after: float | None = None
    restarts: int = 0
    state: str = "new"  # running, exited
    reloads: int = 0
    config_hash: str | None = None
    ran: list[str | None] = field(default_factory=list)  # the config hash of every start
    exit_reason: str | None = None
    secrets: dict[str, str] = field(default_factory=dict)  # resolved at the last start
    secret_fetches: int = 0
    baselines: list[str | None] = field(default_factory=list)
    latencies: list[float] = field(default_factory=list)
    statistics: dict[str, int] = field(
        default_factory=lambda: {"errors": 0, "warnings": 0, "metrics": 0}
    )
    unreachable: frozenset[str] = frozenset()
    _gather_errors: int = 0
    _heartbeat: asyncio.Task[None] | None = None
    _config_headers: dict[str, str] = field(default_factory=dict)
    _refused: str | None = None
    _tls_pools: dict[tuple[str, str | None, str, str], HttpPool] = field(default_factory=dict)

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
        self,
        method: str,
        path: str,
        headers: dict[str, str],
        body: bytes = b"",
        pool: HttpPool | None = None,
    ) -> Any:
        started = time.perf_counter()
        reply = await (pool or self.pool).request(method, path, headers, body)
        self.latencies.append(time.perf_counter() - started)
        return reply

    def _plugin_pool(self, options: dict[str, Any]) -> HttpPool:
        """The connection a plugin (heartbeat, secret store) talks to this server over: its own
        TLS one when it has a client certificate, else the shared pool."""
        cert, key = options.get("tls_cert"), options.get("tls_key")
        if not cert or not key:
            return self.pool
        parts = urlsplit(str(options["url"]))
        ca = str(options["tls_ca"]) if options.get("tls_ca") else None
        ident = (f"{parts.scheme}://{parts.netloc}", ca, str(cert), str(key))
        pool = self._tls_pools.get(ident)
        if pool is None:
            context = ssl.create_default_context(cafile=ca)
            context.load_cert_chain(str(cert), str(key))
            pool = self._tls_pools[ident] = HttpPool(ident[0], size=2, tls=context)
        return pool

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
        """Start, then watch and reload until the process exits (or is cancelled); with
        ``restart_after``, start it again after each exit."""
        try:
            while True:
                while await self._start():
                    self.reloads += 1
                if self.restart_after is None:
                    return
                await asyncio.sleep(self.restart_after)
                self.restarts += 1
        finally:
            await self._stop_heartbeat()
            for pool in self._tls_pools.values():
                await pool.close()
            self._tls_pools.clear()

    async def _start(self) -> bool:
        """Run one configuration; True to reload, False when the process exited."""
        config = await self._fetch()
        if config is None:
            self.state, self.exit_reason = "exited", "config fetch or parse failed"
            return False
        if self._refused is not None:
            self.state, self.exit_reason = "exited", self._refused
            return False
        linked = await self._link_secrets(config)
        if isinstance(linked, str):
            self.state, self.exit_reason = "exited", linked
            return False
        self.secrets = linked
        self.state = "running"
        self._gather_errors = self._failing_gathers(config)
        beat = (config.get("outputs", {}).get("heartbeat") or [None])[0]
        self.config_hash = None
        if isinstance(beat, dict):
            try:
                pool = self._plugin_pool(beat)
            except OSError as exc:  # the TLS files: Telegraf cannot create the client
                self.state, self.exit_reason = "exited", f"outputs.heartbeat: {exc}"
                return False
            self.config_hash = beat.get("headers", {}).get("X-Strataplane-Config-Hash")
            self._heartbeat = asyncio.create_task(self._beat(beat, pool))
        self.ran.append(self.config_hash)
        try:
            return await self._watch()
        finally:
            await self._stop_heartbeat()

    async def _link_secrets(self, config: dict[str, Any]) -> dict[str, str] | str:
        """The resolved secrets by key, or the error Telegraf would exit with."""
        stores: dict[str, dict[str, Any]] = {}
        for store in config.get("secretstores", {}).get("http", []):
            if isinstance(store, dict):
                stores[str(store.get("id"))] = store
        plugins = {k: v for k, v in config.items() if k != "secretstores"}
        caches: dict[str, dict[str, str]] = {}
        refs = list(_references(plugins))
        for store_id, key in refs:
            store = stores.get(store_id)
            if store is None:
                return f"unknown secret store for @{{{store_id}:{key}}}"
            problem = await self._download(store, caches.setdefault(store_id, {}))
            if problem is not None:
                return f"retrieving resolver for @{{{store_id}:{key}}} failed: {problem}"
        resolved: dict[str, str] = {}
        for store_id, key in refs:
            value = caches[store_id].get(key)
            if value is None:
                ref = f"@{{{store_id}:{key}}}"
                return f'linking secrets failed: resolving "{ref}" failed: not found'
            resolved[key] = value
        return resolved

    async def _download(self, store: dict[str, Any], cache: dict[str, str]) -> str | None:
        headers = {str(k): str(v) for k, v in (store.get("headers") or {}).items()}
        token = str(store.get("token") or "").strip()
        if token:
            headers["Authorization"] = f"Bearer {token}"
        self.secret_fetches += 1
        try:
            pool = self._plugin_pool(store)
            reply = await self._timed("GET", urlsplit(str(store["url"])).path, headers, pool=pool)
        except (OSError, ssl.SSLError) as exc:
            return f"reading body failed: executing request failed: {exc}"
        expected = store.get("success_status_codes") or [200]
        if reply.status not in expected:
            return f"reading body failed: received status code {reply.status}"
        try:
            data = json.loads(reply.body)
        except ValueError as exc:
            return f"invalid JSON: {exc}"
        if not isinstance(data, dict) or not all(isinstance(v, str) for v in data.values()):
            return "json: cannot unmarshal; maybe missing or wrong data transformation"
        cache.update(data)
        return None

    def _failing_gathers(self, config: dict[str, Any]) -> int:
        """Inputs whose ``urls`` name a host this machine cannot reach: one error a gather."""
        if not self.unreachable:
            return 0
        failing = 0
        for instances in (config.get("inputs") or {}).values():
            for options in instances if isinstance(instances, list) else []:
                urls = options.get("urls") if isinstance(options, dict) else None
                hosts = {urlsplit(str(u)).hostname for u in urls or []}
                failing += bool(hosts & self.unreachable)
        return failing

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

    async def _beat(self, options: dict[str, Any], pool: HttpPool) -> None:
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
            self.statistics["errors"] += self._gather_errors
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
                payload = json.dumps(body).encode()
                reply = await self._timed("POST", target, headers, payload, pool=pool)
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


def _references(value: Any) -> Any:
    """Every ``@{store:key}`` in the strings of ``value``, in document order."""
    if isinstance(value, str):
        yield from _SECRET_REF.findall(value)
    elif isinstance(value, dict):
        for item in value.values():
            yield from _references(item)
    elif isinstance(value, list):
        for item in value:
            yield from _references(item)
