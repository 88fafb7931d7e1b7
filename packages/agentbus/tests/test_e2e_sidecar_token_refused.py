"""End to end, the `agentbus` CLI when the gateway refuses the agent's integration token
(revoked, unknown): `send` fails at once with the AB- code and exit 3 and keeps nothing queued,
and `inbox` says so instead of calling it offline. Only an unreachable gateway queues."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest
from agentbus.e2e import Sidecar, World

pytestmark = pytest.mark.timeout(300)


def use_token(agent: Sidecar, token: str) -> None:
    """``agent``'s credentials.json with ``token`` and no cached agent credential, so the next
    command issues one with ``token``."""
    stored = json.loads(agent.credentials.read_text())
    stored.update(integration_token=token, agent_credential=None)
    agent.credentials.write_text(json.dumps(stored))


async def revoked_token(pair: World, agent: Sidecar) -> str:
    """A token minted for ``agent`` and revoked, after one send through it worked."""
    bootstrap = json.loads(agent.credentials.read_text())["integration_token"]
    headers = {"Authorization": f"Bearer {bootstrap}"}
    async with httpx.AsyncClient(base_url=pair.stack.url) as client:
        minted = await client.post("/v1/tokens", json={"name": "laptop"}, headers=headers)
        assert minted.status_code == 201, minted.text
        use_token(agent, minted.json()["token"])
        assert (await agent.cli("send", pair.bob.address, "while it works"))["state"] == "sent"
        gone = await client.request(
            "DELETE", f"/v1/tokens/{minted.json()['id']}", json={}, headers=headers
        )
        assert gone.status_code == 200, gone.text
    await asyncio.sleep(1.1)  # every gateway instance has seen the revocation
    return str(minted.json()["token"])


async def test_a_send_with_a_revoked_token_fails_at_once_and_queues_nothing(pair: World) -> None:
    alice = pair.alice
    await revoked_token(pair, alice)

    refused = await alice.cli("send", pair.bob.address, "after the revocation", expect=3)

    assert refused["error"]["code"] == "AB-1003", refused
    assert refused["error"]["message"].startswith("AB-1003: "), refused
    assert (await alice.cli("outbox"))["outbox"] == []
    inbox = await alice.cli("inbox", expect=3)
    assert inbox["error"]["code"] == "AB-1003", inbox


async def test_a_send_with_an_unknown_token_fails_at_once_and_queues_nothing(pair: World) -> None:
    alice = pair.alice
    use_token(alice, "ab_live_" + "x" * 40)

    refused = await alice.cli("send", pair.bob.address, "with a token nobody issued", expect=3)

    assert refused["error"]["code"] == "AB-1002", refused
    assert (await alice.cli("outbox"))["outbox"] == []
