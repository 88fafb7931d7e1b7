"""Elastic Agent check-ins under load, against the real served app: with one round at once and
no queue, a burst of check-ins is answered 200 or 503 with Retry-After in Fleet's shape (never
a 500); the simulated agents back off as Elastic Agent does and all prove the policy; a new
revision reaches every held check-in by its notice, long before the long poll would end."""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from typing import Any

import pytest
from platformkit.db.scope import tenant_transaction
from strataplane.actions import fleet_enrollment
from strataplane.db import SCOPE
from strataplane.simulate.elastic import EqualJitter, SimulatedElasticAgent
from strataplane.simulate.http import HttpPool, Reply
from strataplane.simulate.seed import publish
from strataplane.testing import Seed
from strataplane.testing.served import platform_tenant, stop

LAYER = """agentKind = "elastic-agent"
owner = "platform"
routes = ["es"]

[config.inputs.system-metrics]
type = "system/metrics"
use_output = "default"
period = "{period}"
"""
ROUTE = """agentKind = "elastic-agent"
owner = "platform"

[config.outputs.default]
type = "elasticsearch"
hosts = ["https://es.example.com:9200"]
"""
AGENTS = 24


def tree(period: str) -> dict[str, str]:
    return {
        "layers/elastic.toml": LAYER.format(period=period),
        "routes/es.toml": ROUTE,
        "settings.toml": 'owner = "platform"\n',
    }


class CountingPool(HttpPool):
    """The simulators' connections, counting the statuses of every answer."""

    def __init__(self, base_url: str, size: int) -> None:
        super().__init__(base_url, size=size)
        self.statuses: Counter[int] = Counter()
        self.busy: list[Reply] = []

    async def request(self, *args: Any, **kw: Any) -> Reply:
        reply = await super().request(*args, **kw)
        self.statuses[reply.status] += 1
        if reply.status == 503:
            self.busy.append(reply)
        return reply


@pytest.fixture(scope="module")
def served_settings() -> dict[str, str]:
    # one round at once, none waiting: any round beside a running one is refused
    return {"fleet_elastic_rounds": "1", "fleet_elastic_queue": "0"}


async def test_a_burst_gets_503s_not_500s_and_a_new_revision_wakes_held_check_ins(
    served: str, served_seed: Seed
) -> None:
    pool = served_seed.services.pool
    http = CountingPool(served, size=AGENTS + 4)
    tasks: list[asyncio.Task[None]] = []
    try:
        tenant, _, ctx = await platform_tenant(served_seed)
        token = await fleet_enrollment.create_enrollment_token(
            ctx, "ea", agent_kind="elastic-agent", labels={"env": "prod"}
        )
        first = await publish(pool, tenant.id, tree("10s"))
        sims = [
            SimulatedElasticAgent(
                http,
                f"busy-{i}",
                f"busy-{i}.example.com",
                retry_delay=0.2,
                backoff=EqualJitter(0.5, 2.0),  # fleet.checkin.request_backoff_init / _max
            )
            for i in range(AGENTS)
        ]
        for sim in sims:
            status, answer = await sim.enroll(token.plaintext, None)
            assert status == 200, answer

        # the burst: every agent's first check-in at once
        burst = await asyncio.gather(*(sim.checkin() for sim in sims))
        statuses = Counter(status for status, _ in burst)
        assert set(statuses) <= {200, 503}, statuses
        assert statuses[503] > 0, statuses
        refused = http.busy[0]
        assert int(refused.headers["retry-after"]) >= 1
        assert json.loads(refused.body) == {
            "statusCode": 503,
            "error": "ServiceUnavailable",
            "message": "The server is busy; check in again later",
        }

        async def in_sync(revision: int) -> int:
            async with tenant_transaction(pool, SCOPE, tenant.id) as conn:
                cur = await conn.execute(
                    "SELECT count(*) AS n FROM agent_instance WHERE kind = 'elastic-agent' "
                    "AND sync = 'in_sync' AND applied_revision_id = %s",
                    (revision,),
                )
                row = await cur.fetchone()
            assert row is not None
            return int(row["n"])

        async def until(revision: int, within: float) -> None:
            deadline = asyncio.get_running_loop().time() + within
            while await in_sync(revision) < AGENTS:
                assert asyncio.get_running_loop().time() < deadline, f"r{revision} in sync"
                await asyncio.sleep(0.2)

        tasks = [asyncio.create_task(sim.run()) for sim in sims]
        await until(first, 120)
        assert sum(sim.backoffs for sim in sims) > 0  # the refused ones backed off, then got it

        # every agent now holds a check-in for 3 minutes (poll_timeout 5m less 2m); the new
        # revision's notice wakes each, one round at a time, well before that
        second = await publish(pool, tenant.id, tree("20s"))
        await until(second, 120)
        assert all(sim.revision_idx == 2 for sim in sims)
        assert http.statuses[500] == 0, http.statuses
        assert set(http.statuses) <= {200, 503}, http.statuses
    finally:
        await stop(tasks)
        await http.close()
