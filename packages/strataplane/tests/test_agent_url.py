"""The URL agents reach the server at: ``serve --host/--port`` hands enrolling agents that
address (not the default port), and a server started with another agent URL re-renders every
agent at its desired revision without a merge."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from uuid import UUID

from platformkit.db.scope import tenant_transaction
from platformkit.testing.databases import DatabaseFactory
from platformkit.testing.services import free_port
from strataplane.actions import fleet_enrollment, history
from strataplane.agents.settings import default_agent_url
from strataplane.controllers.fleet_reconcile import Reconciler
from strataplane.db import SCOPE
from strataplane.simulate.seed import publish, seed_fleet
from strataplane.store import fleet_agents, fleet_artifacts
from strataplane.testing import Seed

TREE = {
    "layers/base.toml": 'agentKind = "telegraf"\nowner = "platform"\n\n'
    "[config.inputs.cpu.default]\npercpu = true\n",
}


def test_the_default_agent_url_is_the_listening_address() -> None:
    assert default_agent_url("127.0.0.1", 7815) == "http://127.0.0.1:7815"
    assert default_agent_url("::1", 7815) == "http://[::1]:7815"
    wildcard = "0.0.0.0"  # noqa: S104 - a listener on every address, not a bind
    everywhere = default_agent_url(wildcard, 7815)
    assert everywhere.endswith(":7815")
    assert wildcard not in everywhere


async def test_a_changed_agent_url_re_renders_every_agent_without_a_merge(sp_seed: Seed) -> None:
    pool = sp_seed.services.pool
    tenant, admin = await sp_seed.tenant()
    revision = await publish(pool, tenant.id, TREE)
    known = await history.list_revisions(sp_seed.ctx(admin, tenant.id))
    seeded = await seed_fleet(pool, tenant.id, 3, [{"env": "prod"}])
    ids = [a[0] for a in seeded]

    async def contents() -> dict[UUID, tuple[int | None, str]]:
        async with tenant_transaction(pool, SCOPE, tenant.id) as conn:
            agents = [await fleet_agents.get_agent(conn, tenant.id, i) for i in ids]
            digests = [a.desired_artifact for a in agents if a and a.desired_artifact]
            arts = await fleet_artifacts.get_artifacts(conn, tenant.id, digests)
        out = {}
        for a in agents:
            assert a is not None
            assert a.desired_artifact is not None
            out[a.id] = (a.desired_revision_id, arts[a.desired_artifact].content.decode())
        return out

    assert await Reconciler(pool, "http://old.example:7800").reconcile(tenant.id) == 3
    before = await contents()
    assert all("http://old.example:7800/agents/telegraf/heartbeat" in c for _, c in before.values())
    # the same server again: nothing to do
    assert await Reconciler(pool, "http://old.example:7800").reconcile(tenant.id) == 0
    # restarted on another port: every agent is re-rendered at the revision it had
    assert await Reconciler(pool, "http://new.example:7815").reconcile(tenant.id) == 3
    after = await contents()
    for agent_id, (rev, content) in after.items():
        assert rev == revision == before[agent_id][0]
        assert "http://new.example:7815/agents/telegraf/heartbeat" in content
        assert "old.example" not in content
    assert await history.list_revisions(sp_seed.ctx(admin, tenant.id)) == known  # no merge


def test_serve_hands_agents_the_port_it_listens_on(
    database_factory: DatabaseFactory, strataplane_template: str, tmp_path: Path
) -> None:
    import asyncio

    from platformkit.db.pool import open_pool
    from platformkit.passwords import FAST_TEST_POLICY
    from pydantic import SecretStr
    from strataplane import db
    from strataplane.actions.context import Services
    from strataplane.settings import Settings

    url = database_factory.create(strataplane_template, stem="spurl")
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("STRATAPLANE_")}
    env["STRATAPLANE_DATABASE_URL"] = url
    command = Path(sys.executable).parent / "strataplane"
    with (tmp_path / "serve.log").open("wb") as log:
        process = subprocess.Popen(
            [str(command), "serve", "--host", "127.0.0.1", "--port", str(port)],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=log,
            start_new_session=True,
        )
    try:

        async def token() -> str:
            pool = await open_pool(db.app_url(url), min_size=1, max_size=2)
            try:
                services = Services(
                    pool, Settings(database_url=SecretStr(url)), password_policy=FAST_TEST_POLICY
                )
                seed = Seed(services)
                tenant, admin = await seed.tenant()
                made = await fleet_enrollment.create_enrollment_token(
                    seed.ctx(admin, tenant.id), "web"
                )
                return made.plaintext
            finally:
                await pool.close()

        plaintext = asyncio.run(token())
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 120
        body = json.dumps({"instance_id": "web-1", "hostname": "web-1.example.com"}).encode()
        while True:
            assert process.poll() is None, (tmp_path / "serve.log").read_text()
            request = urllib.request.Request(  # noqa: S310 - loopback http
                f"{base}/api/v1/enroll/telegraf",
                data=body,
                method="POST",
                headers={
                    "Authorization": f"Bearer {plaintext}",
                    "Content-Type": "application/json",
                },
            )
            try:
                with urllib.request.urlopen(request, timeout=10) as reply:  # noqa: S310
                    enrolled = json.loads(reply.read())
                break
            except OSError:
                assert time.monotonic() < deadline, (tmp_path / "serve.log").read_text()
                time.sleep(0.5)
        assert enrolled["config_url"] == f"{base}/agents/telegraf/config"
        assert f"--config {base}/agents/telegraf/config" in enrolled["command"]
        assert f"agents reach it at {base}" in (tmp_path / "serve.log").read_text()
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(60)
        database_factory.drop(url)
