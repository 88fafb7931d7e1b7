"""Simulated Elastic Agents speaking the Fleet Server protocol as PROTOCOLS.md and
elastic/fleet-server's ``model/openapi.yml`` describe it:

- enroll: ``POST /api/fleet/agents/enroll`` with ``Authorization: ApiKey <enrollment key>``,
  ``{type: PERMANENT, id, replace_token, metadata: {local: {host: {hostname}}}}``; the answer's
  ``access_api_key`` authenticates everything after;
- check-in loop: ``POST /api/fleet/agents/{id}/checkin`` with ``status``, ``message``,
  ``ack_token``, ``components``, ``poll_timeout`` and ``policy_revision_idx``; the server holds
  it until it has actions;
- POLICY_CHANGE: the policy's inputs become components ``<type>-default`` with one input unit per
  input and one output unit; an input whose ``type`` is in ``failing`` starts FAILED (the agent
  runs on, its status ``degraded``); the action is acknowledged (an ACTION_RESULT event) and the
  next check-in reports the policy's revision as ``policy_revision_idx``;
- SETTINGS: the log level in ``data.log_level`` becomes the agent's (an empty one resets it to
  ``info``), the action is acknowledged, and check-ins report it as
  ``local_metadata.elastic.agent.log_level``; a level Elastic Agent does not know is not
  acknowledged (its handler fails before the ack);
- UNENROLL: acknowledged, then the agent stops;
- after more than 6 consecutive 401s the agent unenrolls itself (stops), an earlier 401 waits
  ``retry_delay`` (the agent's next check-in tick); any other failed check-in (a 503 or 429 from
  a busy server, a refused connection) is retried after Elastic Agent's equal-jitter back-off
  (``EqualJitter``: ``fleet.checkin.request_backoff_init``, 60 s, doubling up to
  ``request_backoff_max``, 10 min); an action whose ack was lost is delivered and acked again.
"""

from __future__ import annotations

import asyncio
import json
import random
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

__all__ = ["EqualJitter", "SimulatedElasticAgent"]

_LEVELS = frozenset({"", "trace", "debug", "info", "warning", "error"})


@dataclass
class EqualJitter:
    """Elastic Agent's check-in back-off (``pkg/backoff/equal_jitter.go``): the n-th wait of a
    run of failures is half its duration plus a random part of the previous duration, the
    duration starting at twice ``init`` and doubling up to ``maximum``; a success resets it."""

    init: float = 60.0
    maximum: float = 600.0
    rand: random.Random = field(default_factory=random.Random)
    _duration: float = 0.0
    _next_rand: float = 0.0

    def __post_init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self._duration = self.init * 2
        self._next_rand = self.rand.uniform(0, self.init)

    def next_wait(self) -> float:
        wait = self._duration / 2 + self._next_rand
        self._next_rand = self.rand.uniform(0, self._duration)
        self._duration = min(self._duration * 2, self.maximum)
        return wait


@dataclass
class SimulatedElasticAgent:
    pool: Any  # HttpPool
    agent_id: str
    hostname: str
    version: str = "8.15.0"
    poll_timeout: str = "5m"
    retry_delay: float = 1.0
    failing: frozenset[str] = frozenset()
    backoff: EqualJitter = field(default_factory=EqualJitter)
    backoffs: int = 0  # failed check-ins retried after the back-off
    log_level: str = "info"
    request_timeout: float = 300.0
    access_key: str | None = None
    state: str = "new"  # running, unenrolled, stopped
    revision_idx: int = 0
    policy: dict[str, Any] | None = None
    ack_token: str | None = None
    unauthorized: int = 0
    latencies: list[float] = field(default_factory=list)
    acked: list[str] = field(default_factory=list)

    def _headers(self, key: str) -> dict[str, str]:
        return {
            "Authorization": f"ApiKey {key}",
            "User-Agent": f"Elastic Agent v{self.version}",
            "Content-Type": "application/json",
        }

    async def _post(self, path: str, key: str, body: dict[str, Any]) -> tuple[int, Any]:
        """A request given up after ``request_timeout`` (TimeoutError, an OSError), as the
        fleet client's timeout gives up a check-in never answered (a lost connection); the
        default is the ``poll_timeout`` sent, which the server's hold never reaches."""
        started = time.perf_counter()
        async with asyncio.timeout(self.request_timeout):
            reply = await self.pool.request(
                "POST", path, self._headers(key), json.dumps(body).encode()
            )
        self.latencies.append(time.perf_counter() - started)
        try:
            return reply.status, json.loads(reply.body)
        except ValueError:
            return reply.status, None

    async def enroll(
        self, enrollment_key: str, replace_token: str | None = None
    ) -> tuple[int, Any]:
        body: dict[str, Any] = {
            "type": "PERMANENT",
            "id": self.agent_id,
            "metadata": {
                "local": {
                    "host": {"hostname": self.hostname},
                    "elastic": {"agent": {"version": self.version}},
                },
                "user_provided": {},
                "tags": [],
            },
        }
        if replace_token is not None:
            body["replace_token"] = replace_token
        status, answer = await self._post("/api/fleet/agents/enroll", enrollment_key, body)
        if status == 200:
            self.access_key = answer["item"]["access_api_key"]
        return status, answer

    def components(self) -> list[dict[str, Any]]:
        if self.policy is None:
            return []
        by_type: dict[str, list[dict[str, Any]]] = {}
        for item in self.policy.get("inputs", []):
            by_type.setdefault(str(item.get("type")), []).append(item)
        out = []
        for kind, inputs in sorted(by_type.items()):
            failed = kind in self.failing
            units = [
                {
                    "id": f"{kind}-default-{i['id']}",
                    "type": "input",
                    "status": "FAILED" if failed else "HEALTHY",
                    "message": f"{kind} cannot start" if failed else "Healthy",
                }
                for i in inputs
            ]
            units.append(
                {"id": f"{kind}-default", "type": "output", "status": "HEALTHY", "message": ""}
            )
            out.append(
                {
                    "id": f"{kind}-default",
                    "type": kind,
                    "status": "FAILED" if failed else "HEALTHY",
                    "message": "a unit failed" if failed else "Healthy",
                    "units": units,
                }
            )
        return out

    def _status(self) -> tuple[str, str]:
        if any(c["status"] == "FAILED" for c in self.components()):
            return "degraded", "1 or more components/units in a failed state"
        return "online", "Running"

    async def checkin(self) -> tuple[int, Any]:
        assert self.access_key is not None
        status, message = self._status()
        body: dict[str, Any] = {
            "status": status,
            "message": message,
            "components": self.components(),
            "poll_timeout": self.poll_timeout,
            "local_metadata": {
                "host": {"hostname": self.hostname},
                "elastic": {"agent": {"version": self.version, "log_level": self.log_level}},
            },
        }
        if self.ack_token is not None:
            body["ack_token"] = self.ack_token
        if self.revision_idx:
            body["policy_revision_idx"] = self.revision_idx
            body["agent_policy_id"] = "strataplane"
        return await self._post(f"/api/fleet/agents/{self.agent_id}/checkin", self.access_key, body)

    async def _ack(self, action_ids: list[str]) -> None:
        assert self.access_key is not None
        now = datetime.now(UTC).isoformat()
        events = [
            {
                "type": "ACTION_RESULT",
                "subtype": "ACKNOWLEDGED",
                "agent_id": self.agent_id,
                "action_id": a,
                "message": "Action acknowledged.",
                "timestamp": now,
            }
            for a in action_ids
        ]
        status, _ = await self._post(
            f"/api/fleet/agents/{self.agent_id}/acks", self.access_key, {"events": events}
        )
        if status == 200:
            self.acked += action_ids

    async def handle(self, actions: list[dict[str, Any]]) -> None:
        """Apply the actions of one check-in answer, then acknowledge them."""
        done: list[str] = []
        unenroll = False
        for action in actions:
            if action["type"] == "POLICY_CHANGE":
                self.policy = action["data"]["policy"]
                self.revision_idx = int(self.policy.get("revision", 0))
            elif action["type"] == "SETTINGS":
                level = str(action.get("data", {}).get("log_level", ""))
                if level not in _LEVELS:
                    continue  # the handler fails: no ack
                self.log_level = level or "info"
            elif action["type"] == "UNENROLL":
                unenroll = True
            done.append(action["id"])
        if done:
            await self._ack(done)
        if unenroll:
            self.state = "unenrolled"

    async def run(self) -> None:
        """Check in until unenrolled (or cancelled)."""
        self.state = "running"
        while self.state == "running":
            try:
                status, answer = await self.checkin()
            except OSError:
                await self._back_off()
                continue
            if status == 401:
                self.unauthorized += 1
                if self.unauthorized > 6:
                    self.state = "unenrolled"
                    return
                await asyncio.sleep(self.retry_delay)
                continue
            self.unauthorized = 0
            if status != 200 or not isinstance(answer, dict):
                await self._back_off()
                continue
            self.backoff.reset()
            self.ack_token = answer.get("ack_token") or self.ack_token
            try:
                await self.handle(answer.get("actions") or [])
            except OSError:  # the acks did not arrive: the actions come again, acked again
                await asyncio.sleep(self.retry_delay)

    async def _back_off(self) -> None:
        self.backoffs += 1
        await asyncio.sleep(self.backoff.next_wait())
