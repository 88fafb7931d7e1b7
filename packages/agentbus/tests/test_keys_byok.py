"""Bring your own key against AWS KMS as moto's server plays it on loopback, with IAM enforced:
an enterprise tenant moves its data keys under its own KMS key (the old payloads stay readable,
new ones are sealed under a key only KMS unwraps), and revoking the gateway's access to that key
crypto-shreds the tenant's payloads while their metadata stays readable."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
import httpx
import psycopg
import pytest
from agentbus.gateway.config import GatewaySettings
from agentbus.gateway.testing import serving
from agentbus.gateway.testkit import alice_and_bob, make_world, owner_token, post_envelope
from platformkit.testing.services import free_port, tcp_reachable

CEILING_S = 60.0
ALLOW_KMS = {"Version": "2012-10-17", "Statement": [
    {"Effect": "Allow", "Action": ["kms:Encrypt", "kms:Decrypt"], "Resource": "*"}]}  # fmt: skip
ALLOW_ALL = {"Version": "2012-10-17", "Statement": [
    {"Effect": "Allow", "Action": "*", "Resource": "*"}]}  # fmt: skip


@dataclass
class Kms:
    endpoint: str
    key_arn: str
    gateway_keys: dict[str, str]
    admin: dict[str, str]

    def client(self, service: str, keys: dict[str, str]) -> Any:
        return boto3.client(service, endpoint_url=self.endpoint, region_name="us-east-1", **keys)

    def revoke(self) -> None:
        """The customer takes the gateway's Encrypt and Decrypt away."""
        self.client("iam", self.admin).delete_user_policy(UserName="agentbus", PolicyName="kms")


def _user(iam: Any, name: str, policy: dict[str, Any]) -> dict[str, str]:
    iam.create_user(UserName=name)
    iam.put_user_policy(UserName=name, PolicyName="kms", PolicyDocument=json.dumps(policy))
    key = iam.create_access_key(UserName=name)["AccessKey"]
    return {
        "aws_access_key_id": key["AccessKeyId"],
        "aws_secret_access_key": key["SecretAccessKey"],
    }


@pytest.fixture
def kms(tmp_path: Path) -> Iterator[Kms]:
    """moto's server with IAM enforced after the seven set-up calls below."""
    port = free_port()
    log = (tmp_path / "moto.log").open("wb")
    env = {**os.environ, "INITIAL_NO_AUTH_ACTION_COUNT": "7"}
    process = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        env=env, stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + CEILING_S
        while not tcp_reachable("127.0.0.1", port, 0.2):
            assert process.poll() is None, "moto exited"
            assert time.monotonic() < deadline, "moto did not start"
            time.sleep(0.1)
        endpoint = f"http://127.0.0.1:{port}"
        root = {"aws_access_key_id": "AKIAROOTSETUP0000000", "aws_secret_access_key": "setup"}
        boot = Kms(endpoint, "", {}, root)
        arn = boot.client("kms", root).create_key()["KeyMetadata"]["Arn"]
        iam = boot.client("iam", root)
        gateway_keys = _user(iam, "agentbus", ALLOW_KMS)
        admin = _user(iam, "customer-admin", ALLOW_ALL)
        yield Kms(endpoint, arn, gateway_keys, admin)
    finally:
        process.terminate()
        process.wait(10)
        log.close()


async def _eventually_refused(client: httpx.AsyncClient, url: str, headers: Any) -> Any:
    deadline = time.monotonic() + CEILING_S
    while True:
        reply = await client.get(url, headers=headers)
        if reply.status_code != 200 or time.monotonic() > deadline:
            return reply
        await asyncio.sleep(0.5)


async def test_byok_tenant_and_crypto_shredding_by_revocation(
    kms: Kms, tmp_path: Path, agentbus_db: str, nats_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", kms.gateway_keys["aws_access_key_id"])
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", kms.gateway_keys["aws_secret_access_key"])
    settings = GatewaySettings(
        database_url=agentbus_db, nats_url=nats_url, config_dir=tmp_path / "config",
        background=False, kms_aws_region="us-east-1", kms_aws_endpoint_url=kms.endpoint,
        unwrapped_key_ttl_s=1.0,
    )  # fmt: skip
    async with serving(settings) as (app, client):
        gateway = app.state.gateway
        world, alice, bob = await alice_and_bob(gateway, client)
        with psycopg.connect(agentbus_db) as conn:
            conn.execute("UPDATE tenants SET plan = 'enterprise' WHERE id = %s", (world.tenant_id,))
        admin = {"Authorization": f"Bearer {world.token}"}
        auditor = await owner_token(gateway, world, ["read_audit"])
        before = alice.envelope(bob.address, {"text": "under the platform key"})
        await post_envelope(client, alice, before)

        ref = f"kms://aws/{kms.key_arn}"
        missing = await client.put("/v1/keys/kek", headers=admin,
                                   json={"kek_ref": ref.replace(ref[-8:], "00000000")})  # fmt: skip
        assert missing.json()["code"] == "AB-9020", missing.text
        starter = await make_world(gateway, "globex")
        theirs = {"Authorization": f"Bearer {starter.token}"}
        refused = await client.put("/v1/keys/kek", json={"kek_ref": ref}, headers=theirs)
        assert refused.json()["code"] == "AB-8001", refused.text

        moved = await client.put("/v1/keys/kek", json={"kek_ref": ref}, headers=admin)
        assert moved.status_code == 200, moved.text
        assert moved.json() == {"kek_ref": ref, "rewrapped": 1, "active_version": 2}
        with psycopg.connect(agentbus_db) as conn:
            rows = conn.execute("SELECT kek_provider, kek_ref FROM tenant_keys WHERE tenant_id"
                                " = %s", (world.tenant_id,)).fetchall()  # fmt: skip
        assert rows == [("aws_kms", ref)] * 2
        after = alice.envelope(bob.address, {"text": "under the tenant's own key"})
        await post_envelope(client, alice, after)
        for env in (before, after):
            reply = await client.get(f"/v1/messages/{env['id']}?include=envelope", headers=auditor)
            assert reply.json()["envelope"]["data"] == env["data"], reply.text

        kms.revoke()
        for env in (before, after):
            url = f"/v1/messages/{env['id']}?include=envelope"
            gone = await _eventually_refused(client, url, auditor)
            assert gone.json()["code"] == "AB-9020", gone.text
            meta = await client.get(f"/v1/messages/{env['id']}", headers=auditor)
            assert meta.status_code == 200, meta.text
        actions = (await client.get("/v1/audit/actions?action=tenant.kek.update",
                                    headers=auditor)).json()["items"]  # fmt: skip
        assert actions[0]["details"]["to"] == ref
