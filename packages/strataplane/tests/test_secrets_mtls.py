"""Trust anchors and mTLS end to end: real certificates made with ``cryptography``, the TLS
front of platformkit before the served app (granian in its own process), httpx and the
simulated Telegraf as TLS clients. A Secret requiring high assurance is withheld from an agent
without a certificate, delivered once it presents one its tenant's anchor issued for its host
(the certificate is bound, the delivery recorded as high), required from then on, and the
agent drops to low when the anchor is revoked."""

from __future__ import annotations

import asyncio
import datetime as dt
import http.server
import json
import ssl
import threading
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Any
from uuid import UUID

import httpx
import pytest
from cryptography.hazmat.primitives import serialization
from platformkit.db.scope import tenant_transaction
from platformkit.http.tls_front import TlsFrontConfig, serve_tls_front
from platformkit.testing.pki import Issued, crl, issue
from platformkit.testing.services import free_port
from strataplane.actions import fleet_enrollment, secrets, trust_anchors
from strataplane.actions.context import Ctx, Services
from strataplane.db import SCOPE
from strataplane.simulate.http import HttpPool
from strataplane.simulate.seed import publish
from strataplane.simulate.telegraf import SimulatedTelegraf
from strataplane.testing import Seed, served_strataplane

LAYER = (
    'agentKind = "telegraf"\nowner = "platform"\nroutes = ["influx"]\n\n'
    "[config.inputs.cpu.default]\npercpu = false\n"
)
ROUTE = (
    'agentKind = "telegraf"\nowner = "platform"\n\n[config.outputs.influxdb_v2.main]\n'
    'urls = ["https://influx.example.com"]\ntoken = "secret://INFLUX_TOKEN"\n'
)
TREE = {
    "layers/base.toml": LAYER,
    "routes/influx.toml": ROUTE,
    "secrets/INFLUX_TOKEN.toml": 'owner = "platform"\nminAssurance = "high"\n\n[grant]\n',
    "settings.toml": (
        'owner = "platform"\n\n[telegraf.heartbeat]\ninterval = "1s"\n\n[telegraf.tls]\n'
        'ca = "env://AGENT_TLS_CA"\ncert = "env://AGENT_TLS_CERT"\nkey = "env://AGENT_TLS_KEY"\n'
    ),
}
VALUE = "only-for-certified-agents"


@dataclass
class Pki:
    ca: Issued
    ca_pem: str
    server_ca: str
    client_ca_bundle: str
    server: tuple[str, str]
    agent: tuple[str, str]
    agent_serial: int
    rogue: tuple[str, str]
    issuing_pem: str  # an intermediate CA below the anchor
    via_issuing: tuple[str, str]  # the agent's certificate it issued, the chain in the file


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    d = tmp_path_factory.mktemp("pki")
    ca, rogue_ca = issue("tenant agents CA", ca=True), issue("another CA", ca=True)
    host = ["web-7.example.com"]
    agent, issuing = issue("web-7", ca, dns=host), issue("issuing CA", ca, ca=True)
    (d / "ca.pem").write_bytes(ca.pem())
    (d / "clients.pem").write_bytes(ca.pem() + rogue_ca.pem())
    return Pki(
        ca=ca,
        ca_pem=ca.pem().decode(),
        server_ca=str(d / "ca.pem"),
        client_ca_bundle=str(d / "clients.pem"),
        server=issue("front", ca, ip="127.0.0.1").save(d, "server"),
        agent=agent.save(d, "agent"),
        agent_serial=agent.cert.serial_number,
        rogue=issue("web-7", rogue_ca, dns=host).save(d, "rogue"),
        issuing_pem=issuing.pem().decode(),
        via_issuing=issue("web-7", issuing, dns=host).save(d, "leaf", chain=[issuing]),
    )


def _crl(pki: Pki, revoked: list[int]) -> bytes:
    """The anchor CA's CRL (DER) listing ``revoked``, due again in a second."""
    made = crl(pki.ca, revoked, next_update=dt.timedelta(seconds=1))
    return made.public_bytes(serialization.Encoding.DER)


class _CrlHandler(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body: bytes = self.server.crl  # type: ignore[attr-defined]
        self.send_response(200)
        self.send_header("Content-Type", "application/pkix-crl")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def crl_server() -> Iterator[http.server.ThreadingHTTPServer]:
    """A distribution point on loopback: tests put the CRL it serves in ``.crl``."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _CrlHandler)
    server.crl = b""  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="module")
def served(served_database: str) -> Iterator[tuple[int, int]]:
    """The server's port and its TLS front's, which agents are told to reach."""
    tls_port = free_port()
    with served_strataplane(
        served_database,
        fleet_agent_url=f"https://127.0.0.1:{tls_port}",
        fleet_proxy_from='["127.0.0.1/32"]',  # the TLS front's address
        fleet_egress_allow='["127.0.0.1/32"]',  # the CRL server of the tests
        fleet_crl_min_refresh="0.5",
    ) as url:
        yield int(url.rsplit(":", 1)[1]), tls_port


@dataclass
class World:
    services: Services
    ctx: Ctx
    tenant_id: UUID
    plain: HttpPool
    tls_url: str
    enrolled: dict[str, Any]

    async def rows(self, query: str) -> list[dict[str, Any]]:
        async with tenant_transaction(self.services.pool, SCOPE, self.tenant_id) as conn:
            return list(await (await conn.execute(query, (self.tenant_id,))).fetchall())


@pytest.fixture
async def world(served: tuple[int, int], served_seed: Seed, pki: Pki) -> AsyncIterator[World]:
    (port, tls_port), seed, services = served, served_seed, served_seed.services
    pool = services.pool
    tenant, admin = await seed.tenant()
    ctx = seed.ctx(admin, tenant.id)
    await publish(pool, tenant.id, TREE)
    await secrets.set_secret(ctx, "INFLUX_TOKEN", VALUE)
    await trust_anchors.add_trust_anchor(ctx, "agents", pki.ca_pem)
    made = await fleet_enrollment.create_enrollment_token(ctx, "e", labels={"env": "prod"})
    plain = HttpPool(f"http://127.0.0.1:{port}", size=4)
    reply = await plain.request(
        "POST",
        "/api/v1/enroll/telegraf",
        {"Authorization": f"Bearer {made.plaintext}", "Content-Type": "application/json"},
        json.dumps({"instance_id": "web-7", "hostname": "web-7.example.com"}).encode(),
    )
    assert reply.status == 201, reply.body
    config = TlsFrontConfig(
        ("127.0.0.1", tls_port),
        ("127.0.0.1", port),
        pki.server[0],
        pki.server[1],
        pki.client_ca_bundle,
    )
    async with await serve_tls_front(config):
        url = f"https://127.0.0.1:{tls_port}"
        yield World(services, ctx, tenant.id, plain, url, json.loads(reply.body))
    await plain.close()


async def _until_status(
    world: World, path: str, headers: dict[str, str], status: int, body: str
) -> None:
    """Replicas learn a binding change by NOTIFY, moments after the commit."""
    deadline = asyncio.get_running_loop().time() + 30
    sent = {**headers, "Content-Type": "application/json"}
    while (await world.plain.request("POST", path, sent, body.encode())).status != status:
        assert asyncio.get_running_loop().time() < deadline, path
        await asyncio.sleep(0.05)


def _client(world: World, pki: Pki, cert: tuple[str, str] | None) -> httpx.AsyncClient:
    context = ssl.create_default_context(cafile=pki.server_ca)
    if cert is not None:
        context.load_cert_chain(*cert)
    token = world.enrolled["credential"]
    return httpx.AsyncClient(
        base_url=world.tls_url, verify=context, headers={"Authorization": f"Bearer {token}"}
    )


async def test_a_certificate_of_the_tenants_anchor_raises_assurance(world: World, pki: Pki) -> None:
    bearer = {"Authorization": f"Bearer {world.enrolled['credential']}"}
    # poll once so the agent has a served artifact to take Secret names from
    assert (await world.plain.request("GET", "/agents/telegraf/config", bearer)).status == 200
    low = await world.plain.request("GET", "/agents/telegraf/secrets", bearer)
    assert (low.status, json.loads(low.body)) == (200, {})
    async with _client(world, pki, None) as http:
        no_cert = await http.get("/agents/telegraf/secrets")
    assert no_cert.json() == {}
    async with _client(world, pki, pki.rogue) as http:
        rogue = await http.get("/agents/telegraf/secrets")
    assert rogue.json() == {}  # TLS accepted it, but no anchor of the tenant issued it
    async with _client(world, pki, pki.agent) as http:
        high = await http.get("/agents/telegraf/secrets")
        again = await http.get("/agents/telegraf/secrets")
    assert high.json() == again.json() == {"INFLUX_TOKEN": VALUE}
    delivered = await world.rows(
        "SELECT assurance::text AS a, identity_subject FROM secret_delivery WHERE tenant_id = %s"
    )
    assert {(d["a"], d["identity_subject"]) for d in delivered} == {("high", "CN=web-7")}
    agent = await world.rows(
        "SELECT assurance::text AS a, identity_subject FROM agent_instance WHERE tenant_id = %s"
    )
    assert agent == [{"a": "high", "identity_subject": "CN=web-7"}]
    # bound: the same certificate is required from now on where a request can carry one
    refused = await world.plain.request("GET", "/agents/telegraf/secrets", bearer)
    assert refused.status == 403
    assert json.loads(refused.body)["code"] == "agent.certificate_required"
    beat = {"id": "web-7", "version": "Telegraf 1.39.1", "schema": 1}
    await _until_status(world, "/agents/telegraf/heartbeat", bearer, 403, json.dumps(beat))
    async with _client(world, pki, pki.agent) as http:
        assert (await http.post("/agents/telegraf/heartbeat", json=beat)).status_code == 200
    # Telegraf's config URL fetch cannot carry a certificate: it is not asked for one
    assert (await world.plain.request("GET", "/agents/telegraf/config", bearer)).status == 200
    async with _client(world, pki, pki.rogue) as http:
        assert (await http.get("/agents/telegraf/secrets")).status_code == 403
    withheld = await world.rows(
        "SELECT details FROM audit_event WHERE tenant_id = %s AND action = 'secret.withhold'"
    )
    assert withheld[0]["details"]["withheld"] == {"INFLUX_TOKEN": "assurance"}
    assert VALUE not in json.dumps([w["details"] for w in withheld])


async def test_the_simulated_telegraf_fetches_over_mtls(world: World, pki: Pki) -> None:
    """The rendered heartbeat and secret store carry Settings telegraf.tls: Telegraf presents
    its certificate there, while its config fetch (Go's default client) presents none."""
    context = ssl.create_default_context(cafile=pki.server_ca)
    pool = HttpPool(world.tls_url, size=4, tls=context)
    env = dict(world.enrolled["environment"])
    assert world.enrolled["config_url"].startswith(world.tls_url)
    env |= {"AGENT_TLS_CA": pki.server_ca, "AGENT_TLS_CERT": pki.agent[0]}
    env["AGENT_TLS_KEY"] = pki.agent[1]
    sim = SimulatedTelegraf(pool, "/agents/telegraf/config", env, watch_interval=0.3)
    task = asyncio.create_task(sim.run())
    try:
        deadline = asyncio.get_running_loop().time() + 60
        while sim.secrets != {"INFLUX_TOKEN": VALUE}:
            assert sim.state != "exited", sim.exit_reason
            assert asyncio.get_running_loop().time() < deadline
            await asyncio.sleep(0.1)
        # its heartbeats carry the bound certificate too: they prove the artifact it runs
        query = "SELECT sync::text, assurance::text FROM agent_instance WHERE tenant_id = %s"
        while (await world.rows(query))[0] != {"sync": "in_sync", "assurance": "high"}:
            assert asyncio.get_running_loop().time() < deadline, await world.rows(query)
            await asyncio.sleep(0.1)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await pool.close()
    anchors = await world.rows("SELECT id FROM trust_anchor WHERE tenant_id = %s")
    # revoking the anchor unbinds the agent: back to low, the Secret withheld again
    assert await trust_anchors.revoke_trust_anchor(world.ctx, anchors[0]["id"]) == 1
    bearer = {"Authorization": f"Bearer {world.enrolled['credential']}"}
    beat = json.dumps({"id": "web-7", "version": "Telegraf 1.39.1", "schema": 1})
    await _until_status(world, "/agents/telegraf/heartbeat", bearer, 200, beat)
    reply = await world.plain.request("GET", "/agents/telegraf/secrets", bearer)
    assert (reply.status, json.loads(reply.body)) == (200, {})


async def test_a_certificate_its_anchors_crl_lists_gives_no_high_assurance(
    world: World, pki: Pki, crl_server: http.server.ThreadingHTTPServer
) -> None:
    bearer = {"Authorization": f"Bearer {world.enrolled['credential']}"}
    assert (await world.plain.request("GET", "/agents/telegraf/config", bearer)).status == 200
    [anchor] = await world.rows("SELECT id FROM trust_anchor WHERE tenant_id = %s")
    await trust_anchors.revoke_trust_anchor(world.ctx, anchor["id"])
    url = f"http://127.0.0.1:{crl_server.server_address[1]}/agents.crl"
    crl_server.crl = _crl(pki, [pki.agent_serial])  # type: ignore[attr-defined]
    await trust_anchors.add_trust_anchor(world.ctx, "agents", pki.ca_pem, crl_url=url)
    async with _client(world, pki, pki.agent) as http_client:
        listed = await http_client.get("/agents/telegraf/secrets")
    assert (listed.status_code, listed.json()) == (200, {})  # never bound
    assert await world.rows("SELECT identity_subject FROM agent_instance WHERE tenant_id = %s") == [
        {"identity_subject": None}
    ]
    # the list no longer names it (a new CRL after nextUpdate): it binds, high secrets flow
    crl_server.crl = _crl(pki, [])  # type: ignore[attr-defined]
    deadline = asyncio.get_running_loop().time() + 60
    async with _client(world, pki, pki.agent) as http_client:
        while (await http_client.get("/agents/telegraf/secrets")).json() != {"INFLUX_TOKEN": VALUE}:
            assert asyncio.get_running_loop().time() < deadline, "bound once the CRL cleared it"
            await asyncio.sleep(0.3)
        # revoked after binding: the next fetch that sees the new list unbinds it
        crl_server.crl = _crl(pki, [pki.agent_serial])  # type: ignore[attr-defined]
        while (await http_client.get("/agents/telegraf/secrets")).json() != {}:
            assert asyncio.get_running_loop().time() < deadline, "unbound once listed"
            await asyncio.sleep(0.3)
    agent = await world.rows(
        "SELECT assurance::text AS a, identity_subject FROM agent_instance WHERE tenant_id = %s"
    )
    assert agent == [{"a": "low", "identity_subject": None}]
    actions = await world.rows(
        "SELECT action FROM audit_event WHERE tenant_id = %s AND action LIKE 'agent.certificate%%' "
        "ORDER BY seq"
    )
    assert [a["action"] for a in actions][:1] == ["agent.certificate_refuse"]
    assert [a["action"] for a in actions][-2:] == [
        "agent.certificate_bind",
        "agent.certificate_revoked",
    ]
    # an anchor whose list cannot be fetched: its certificates give no high assurance
    [anchor] = await world.rows("SELECT id FROM trust_anchor WHERE tenant_id = %s")
    await trust_anchors.revoke_trust_anchor(world.ctx, anchor["id"])
    gone = f"http://127.0.0.1:{free_port()}/agents.crl"
    await trust_anchors.add_trust_anchor(world.ctx, "agents-2", pki.ca_pem, crl_url=gone)
    async with _client(world, pki, pki.agent) as http_client:
        assert (await http_client.get("/agents/telegraf/secrets")).json() == {}
    refused = await world.rows(
        "SELECT details FROM audit_event WHERE tenant_id = %s "
        "AND action = 'agent.certificate_refuse' ORDER BY seq DESC LIMIT 1"
    )
    assert refused[0]["details"]["reason"] == "no CRL of the anchor answers for it"


async def test_a_certificate_an_intermediate_of_the_anchor_issued_raises_assurance(
    world: World, pki: Pki
) -> None:
    bearer = {"Authorization": f"Bearer {world.enrolled['credential']}"}
    assert (await world.plain.request("GET", "/agents/telegraf/config", bearer)).status == 200
    async with _client(world, pki, pki.via_issuing) as http_client:
        without = await http_client.get("/agents/telegraf/secrets")
    assert without.json() == {}  # the anchor alone does not know the intermediate
    [anchor] = await world.rows("SELECT id FROM trust_anchor WHERE tenant_id = %s")
    await trust_anchors.revoke_trust_anchor(world.ctx, anchor["id"])
    await trust_anchors.add_trust_anchor(world.ctx, "agents", pki.ca_pem + pki.issuing_pem)
    async with _client(world, pki, pki.via_issuing) as http_client:
        high = await http_client.get("/agents/telegraf/secrets")
    assert high.json() == {"INFLUX_TOKEN": VALUE}
    agent = await world.rows(
        "SELECT assurance::text AS a, identity_subject FROM agent_instance WHERE tenant_id = %s"
    )
    assert agent == [{"a": "high", "identity_subject": "CN=web-7"}]
