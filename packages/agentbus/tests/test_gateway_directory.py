"""The send path's one-second copies of key, tenant and recipient rows (``gw.directory``): a
row is read once per TTL, a missing row is never kept, and on the real app a revoked key or a
disabled recipient is refused once the copy expired."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import httpx
import psycopg
import pytest
from agentbus.gateway.api.principals import PrincipalCache
from agentbus.gateway.context import Gateway
from agentbus.gateway.store import directory as directory_module
from agentbus.gateway.store.directory import Directory
from agentbus.gateway.testkit import SimAgent, enroll, make_world
from agentbus.ids import parse_id
from wirekit import canonical_json

TENANT, KEY = uuid.uuid4(), uuid.uuid4()
NO_CONN: Any = object()  # the stand-in reads never touch it
NO_POOL: Any = object()


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """Counted stand-ins for the store reads, answering ``rows[...]``, on a fake clock."""
    state: dict[str, Any] = {"calls": 0, "rows": {}, "clock": Clock()}

    async def get_key(_conn: Any, tenant_id: uuid.UUID, key_id: uuid.UUID) -> Any:
        state["calls"] += 1
        return state["rows"].get((tenant_id, key_id))

    monkeypatch.setattr(directory_module.agents, "get_key", get_key)
    monkeypatch.setattr(directory_module.time, "monotonic", state["clock"])
    return state


async def test_a_row_is_read_once_per_ttl(reads: dict[str, Any]) -> None:
    directory, conn = Directory(NO_POOL, ttl_s=1.0), NO_CONN
    reads["rows"][(TENANT, KEY)] = {"id": KEY, "revoked_at": None}
    assert await directory.key(conn, TENANT, KEY) == {"id": KEY, "revoked_at": None}
    reads["rows"][(TENANT, KEY)] = {"id": KEY, "revoked_at": "now"}
    assert await directory.key(conn, TENANT, KEY) == {"id": KEY, "revoked_at": None}
    assert reads["calls"] == 1
    reads["clock"].now += 1.0
    assert await directory.key(conn, TENANT, KEY) == {"id": KEY, "revoked_at": "now"}
    assert reads["calls"] == 2


async def test_a_missing_row_is_not_kept(reads: dict[str, Any]) -> None:
    directory, conn = Directory(NO_POOL), NO_CONN
    assert await directory.key(conn, TENANT, KEY) is None
    reads["rows"][(TENANT, KEY)] = {"id": KEY}
    assert await directory.key(conn, TENANT, KEY) == {"id": KEY}
    assert reads["calls"] == 2


async def test_several_keys_read_those_not_at_hand_in_one_statement(
    reads: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A pull's sender keys: the keys at hand cost nothing, the rest one statement."""
    asked: list[list[uuid.UUID]] = []

    class Cursor:
        def __init__(self, rows: list[Any]) -> None:
            self.rows = rows

        async def fetchall(self) -> list[Any]:
            return self.rows

    async def keys_cursor(_conn: Any, tenant_id: uuid.UUID, key_ids: list[uuid.UUID]) -> Cursor:
        asked.append(sorted(key_ids))
        return Cursor(
            [reads["rows"][tenant_id, k] for k in key_ids if (tenant_id, k) in reads["rows"]]
        )

    monkeypatch.setattr(directory_module.agents, "keys_cursor", keys_cursor)
    directory, conn = Directory(NO_POOL), NO_CONN
    other, gone = uuid.uuid4(), uuid.uuid4()
    reads["rows"][(TENANT, KEY)] = {"id": KEY}
    reads["rows"][(TENANT, other)] = {"id": other}
    assert await directory.key(conn, TENANT, KEY) == {"id": KEY}  # now at hand
    found = await directory.keys(conn, TENANT, [KEY, other, gone, other])
    assert found == {KEY: {"id": KEY}, other: {"id": other}}
    assert asked == [sorted([other, gone])]
    assert await directory.keys(conn, TENANT, [other]) == {other: {"id": other}}
    assert asked == [sorted([other, gone])]  # kept for the TTL like any other copy


async def post(client: httpx.AsyncClient, sender: SimAgent, to: SimAgent) -> httpx.Response:
    env = sender.sign(sender.envelope(to.address, {"text": "hello"}))
    headers = {**sender.headers(), "Content-Type": "application/cloudevents+json"}
    return await client.post("/v1/messages", content=canonical_json(env), headers=headers)


async def test_changes_take_effect_once_the_copy_expired(
    gateway: Gateway, gateway_client: httpx.AsyncClient, agentbus_db: str
) -> None:
    gateway.directory = Directory(gateway.pool, ttl_s=0.3)
    world = await make_world(gateway, "acme")
    alice = await enroll(gateway_client, world, "alice")
    bob = await enroll(gateway_client, world, "bob")
    carol = await enroll(gateway_client, world, "carol")
    assert (await post(gateway_client, alice, bob)).status_code == 202
    assert (await post(gateway_client, carol, bob)).status_code == 202
    with psycopg.connect(agentbus_db, autocommit=True) as conn:  # as another process would
        conn.execute(
            "UPDATE agent_keys SET revoked_at = now() WHERE id = %s",
            (parse_id("key", alice.key_id),),
        )
        conn.execute(
            "UPDATE agents SET status = 'disabled' WHERE id = %s", (parse_id("agt", bob.agent_id),)
        )
    await asyncio.sleep(0.4)
    refused = await post(gateway_client, alice, bob)
    assert refused.status_code == 422, refused.text
    assert refused.json()["code"] == "AB-2012"
    disabled = await post(gateway_client, carol, bob)
    assert disabled.status_code == 409, disabled.text
    assert disabled.json()["code"] == "AB-3003"


async def test_the_misses_of_sends_that_come_together_are_read_together(
    gateway: Gateway, gateway_client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Agents whose copies all expired send at once: their credentials' state, their keys,
    their own rows (for the policy) and their recipients are read in a few transactions before
    the send's, not one each and none inside it, and every send is answered as if read
    alone."""
    world = await make_world(gateway, "acme")
    agents = [await enroll(gateway_client, world, f"agent-{i}") for i in range(10)]
    gateway.principals = PrincipalCache(gateway.pool)  # every copy expired, as a second later
    gateway.directory = Directory(gateway.pool)
    one_by_one: list[str] = []
    for name in ("get_key", "agent_by_address"):
        read = getattr(directory_module.agents, name)

        async def counted(*args: Any, _read: Any = read, _name: str = name) -> Any:
            one_by_one.append(_name)
            return await _read(*args)

        monkeypatch.setattr(directory_module.agents, name, counted)
    answers = await asyncio.gather(
        *(post(gateway_client, a, agents[(i + 1) % len(agents)]) for i, a in enumerate(agents))
    )
    assert [r.status_code for r in answers] == [202] * len(agents), [r.text for r in answers]
    assert 1 <= gateway.principals.gathered.rounds < len(agents)
    assert 1 <= gateway.directory.gathered.rounds < len(agents)
    assert one_by_one == []
