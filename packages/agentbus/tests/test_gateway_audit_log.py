"""The audit log of elevated actions over the API (04-API-SPEC §10.5) against the real gateway
app and PostgreSQL: newest first, filtered, paged; only for tenant-wide tokens with read_audit
or admin; never another tenant's rows."""

from __future__ import annotations

from typing import Any

import httpx
from agentbus.gateway.context import Gateway
from agentbus.gateway.testkit import alice_and_bob, make_world, owner_token, post_envelope

Json = dict[str, Any]
PATH = "/v1/audit/actions"


async def _list(client: httpx.AsyncClient, headers: dict[str, str], **params: Any) -> Json:
    reply = await client.get(PATH, params=params, headers=headers)
    assert reply.status_code == 200, reply.text
    return dict(reply.json())


async def _refused(client: httpx.AsyncClient, headers: dict[str, str], **params: Any) -> str:
    reply = await client.get(PATH, params=params, headers=headers)
    assert reply.status_code >= 400, reply.text
    return str(reply.json()["code"])


async def test_operators_read_the_tenants_elevated_actions(
    gateway: Gateway, gateway_client: httpx.AsyncClient
) -> None:
    client = gateway_client
    world, alice, bob = await alice_and_bob(gateway, client)
    auditor = await owner_token(gateway, world, ["read_audit"])
    sent = []
    for text in ("first", "second"):
        env = alice.envelope(bob.address, {"text": text})
        await post_envelope(client, alice, env)
        reply = await client.get(f"/v1/messages/{env['id']}?include=envelope", headers=auditor)
        assert reply.status_code == 200, reply.text
        sent.append(env["id"])

    everything = (await _list(client, auditor, limit=200))["items"]
    assert [a["at"] for a in everything] == sorted((a["at"] for a in everything), reverse=True)
    views = (await _list(client, auditor, action="message.view_payload"))["items"]
    assert [v["target_id"] for v in views] == list(reversed(sent))
    assert views[0]["details"]["via"].startswith("tok_")
    assert (views[0]["actor_type"], views[0]["ip"]) == ("user", "127.0.0.1")
    [one] = (await _list(client, auditor, target=sent[0]))["items"]
    assert one["action"] == "message.view_payload"

    walked, cursor = [], None
    while True:
        page = await _list(client, auditor, limit=1, **({"cursor": cursor} if cursor else {}))
        walked += [a["id"] for a in page["items"]]
        if (cursor := page["next_cursor"]) is None:
            break
    assert walked == [a["id"] for a in everything]

    messages_cursor = (await client.get("/v1/messages?limit=1", headers=auditor)).json()
    assert await _refused(client, auditor, cursor=messages_cursor["next_cursor"]) == "AB-8007"
    assert await _refused(client, auditor, action="x" * 201) == "AB-8001"
    assert await _refused(client, await owner_token(gateway, world, ["send"])) == "AB-1007"
    bound = await owner_token(gateway, world, ["read_audit"], world.workspace_id)
    assert await _refused(client, bound) == "AB-1015"
    assert await _refused(client, alice.headers()) == "AB-1002"  # a credential is no token

    other = await make_world(gateway, "globex")
    theirs = (await _list(client, {"Authorization": f"Bearer {other.token}"}))["items"]
    assert sent[0] not in [a["target_id"] for a in theirs]
    assert all(a["action"] != "message.view_payload" for a in theirs)
