"""Agents behind a PROXY-protocol load balancer: ``strataplane serve --agent-proxy-listen``
accepts them there, the header's address is the agent's source address (and picks its network
zone), and a connection without a valid header never reaches the server."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from uuid import UUID

import pytest
from platformkit.db.pool import open_pool
from platformkit.db.scope import tenant_transaction
from platformkit.http.proxy_protocol import encode_v1, encode_v2
from platformkit.passwords import FAST_TEST_POLICY
from platformkit.testing.databases import DatabaseFactory
from platformkit.testing.services import free_port, tcp_reachable
from pydantic import SecretStr
from strataplane import db
from strataplane.actions import fleet_enrollment, fleet_zones
from strataplane.actions.context import Services
from strataplane.db import SCOPE
from strataplane.settings import Settings
from strataplane.store import fleet_agents, fleet_hosts
from strataplane.testing import Seed


@pytest.fixture(scope="module")
def database(database_factory: DatabaseFactory, strataplane_template: str) -> Iterator[str]:
    url = database_factory.create(strataplane_template, stem="spp")
    yield url
    database_factory.drop(url)


@pytest.fixture(scope="module")
def front(database: str) -> Iterator[int]:
    """``strataplane serve`` with a PROXY-protocol listener, as an operator starts it."""
    port, front_port = free_port(), free_port()
    env = {
        **os.environ,
        "STRATAPLANE_DATABASE_URL": database,
        "STRATAPLANE_SHARDS": "2",
        "STRATAPLANE_FLEET_PROXY_FROM": json.dumps(["127.0.0.0/8"]),
    }
    command = [sys.executable, "-m", "strataplane.cli", "serve", "--port", str(port)]
    command += ["--agent-proxy-listen", f"127.0.0.1:{front_port}"]
    process = subprocess.Popen(command, env=env)
    try:
        for _ in range(1200):
            if tcp_reachable("127.0.0.1", port) and tcp_reachable("127.0.0.1", front_port):
                break
            assert process.poll() is None, "strataplane serve exited"
            time.sleep(0.05)
        yield front_port
    finally:
        process.terminate()
        process.wait(30)


@pytest.fixture(scope="module")
async def services(database: str) -> AsyncIterator[Services]:
    pool = await open_pool(db.app_url(database), min_size=1, max_size=2)
    yield Services(pool, Settings(database_url=SecretStr(database)), FAST_TEST_POLICY)
    await pool.close()


async def enroll_through(port: int, preamble: bytes, token: str, name: str) -> tuple[int, bytes]:
    body = json.dumps({"instance_id": name, "hostname": f"{name}.example.com"}).encode()
    request = (
        b"POST /api/v1/enroll/telegraf HTTP/1.1\r\nhost: strataplane\r\n"
        b"authorization: Bearer " + token.encode() + b"\r\ncontent-type: application/json\r\n"
        b"content-length: " + str(len(body)).encode() + b"\r\nconnection: close\r\n\r\n" + body
    )
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(preamble + request)
        await writer.drain()
        answer = await asyncio.wait_for(reader.read(), 30)
    finally:
        writer.close()
    if not answer:
        return 0, b""
    head, _, payload = answer.partition(b"\r\n\r\n")
    return int(head.split(b" ", 2)[1]), payload


async def test_the_proxied_address_is_the_agents_source_and_picks_its_zone(
    front: int, services: Services
) -> None:
    seed = Seed(services)
    tenant, admin = await seed.tenant()
    ctx = seed.ctx(admin, tenant.id)
    await fleet_zones.create_zone(ctx, "10.1.0.0/16", {"zone": "b"}, agent_url="http://x")
    token = (await fleet_enrollment.create_enrollment_token(ctx, "lb")).plaintext

    for encode, address, name in (
        (encode_v1, "10.1.2.3", "web-1"),
        (encode_v2, "10.1.9.9", "web-2"),
    ):
        status, payload = await enroll_through(front, encode((address, 51000)), token, name)
        assert status == 201, payload
        agent_id = UUID(json.loads(payload)["agent_id"])
        async with tenant_transaction(services.pool, SCOPE, tenant.id) as conn:
            agent = await fleet_agents.get_agent(conn, tenant.id, agent_id)
            assert agent is not None
            labels = await fleet_hosts.labels_by_source(conn, tenant.id, agent.host_id)
        assert agent.last_source_ip == address
        assert ("zone", "zone", "b") in {(r["source"], r["key"], r["value"]) for r in labels}

    # No header, or a broken one: the connection is closed before the server sees a byte.
    assert await enroll_through(front, b"", token, "web-3") == (0, b"")
    assert await enroll_through(front, b"PROXY TCP4 10.1.2.3\r\n", token, "web-3") == (0, b"")
