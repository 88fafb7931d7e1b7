"""Sends of several agents that come together share one transaction (``send._round``): each is
still checked and answered as alone. A request whose failure would fail it alone (here a policy
set that no longer parses, AB-4002) undoes the shared transaction; every request then runs in
its own, so only the failing one fails, and the send tokens the undone transaction took are
given back. An envelope sent twice in one round is accepted once and replayed once."""

from __future__ import annotations

import asyncio
import dataclasses
import uuid
from datetime import UTC, datetime
from typing import Any

import psycopg
from agentbus.actions import workspaces
from agentbus.actions.context import Actor, Ctx
from agentbus.db import SCOPE
from agentbus.gateway.actions import send as send_module
from agentbus.gateway.actions.hooks import SendResult
from agentbus.gateway.api.auth import principal_from_credential
from agentbus.gateway.api.principals import AgentPrincipal
from agentbus.gateway.context import Gateway
from agentbus.gateway.domain import errors as e
from agentbus.gateway.metrics import SEND_ROUNDS_UNDONE
from agentbus.gateway.store.directory import Directory
from agentbus.gateway.testkit import SimAgent, World, enroll, make_world
from agentbus.ids import format_id, parse_id
from agentbus.store import plans
from agentbus.store.integration_tokens import verify_integration_token
from platformkit.db.scope import tenant_transaction
from wirekit import canonical_json

CE = "application/cloudevents+json"


async def principal(gw: Gateway, agent: SimAgent) -> AgentPrincipal:
    return await principal_from_credential(gw, agent.credential)


def signed(sender: SimAgent, to: SimAgent) -> dict[str, Any]:
    return sender.sign(sender.envelope(to.address, {"text": f"from {sender.address}"}))


def batch(who: AgentPrincipal, env: dict[str, Any]) -> Any:
    """One request of one envelope, as ``send_envelope`` hands it to a round."""
    now = datetime.now(UTC)
    parsed = send_module._checked(env, who, now)
    return send_module._Batch(who, [(send_module._lane(env), parsed)], now, None)


def stored(url: str, ids: list[str]) -> dict[str, tuple[str, Any]]:
    """message id -> (the sender's agent id, accepted_at), of the rows that exist."""
    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT id, from_agent_id, accepted_at FROM messages WHERE id = ANY(%s)",
            ([parse_id("msg", i) for i in ids],),
        ).fetchall()
    return {format_id("msg", r[0]): (str(r[1]), r[2]) for r in rows}


async def test_the_sends_of_many_agents_share_a_transaction(
    gateway: Gateway, agentbus_db: str, gateway_client: Any
) -> None:
    world = await make_world(gateway, "acme")
    agents = [await enroll(gateway_client, world, f"agent-{i}") for i in range(8)]
    who = [await principal(gateway, a) for a in agents]
    envs = [signed(a, agents[(i + 1) % len(agents)]) for i, a in enumerate(agents)]
    gateway.directory = Directory(gateway.pool)  # every copy expired: the sends meet together
    before = gateway.rounds["send"].rounds if "send" in gateway.rounds else 0
    answers = await asyncio.gather(
        *(
            send_module.send_envelope(gateway, p, canonical_json(env), CE)
            for p, env in zip(who, envs, strict=True)
        )
    )
    assert all(isinstance(a, SendResult) and a.status == 202 for a in answers), answers
    assert 1 <= gateway.rounds["send"].rounds - before < len(agents)
    rows = stored(agentbus_db, [env["id"] for env in envs])
    assert {i: agent for i, (agent, _) in rows.items()} == {
        env["id"]: str(p.agent_id) for p, env in zip(who, envs, strict=True)
    }
    # Rows of one transaction share its accepted_at (now()): fewer transactions than sends.
    assert len({at for _, at in rows.values()}) < len(agents)
    receipts = {a.body["receipt"]["msg_id"] for a in answers}
    assert receipts == {env["id"] for env in envs}  # each answered for its own message


async def other_workspace(gw: Gateway, world: World, slug: str) -> World:
    """A second workspace of the tenant, whose plan is raised to allow it."""
    owner = (await verify_integration_token(gw.pool, world.token)).owner_user_id
    async with tenant_transaction(gw.pool, SCOPE, world.tenant_id) as conn:
        await plans.override_limits(conn, world.tenant_id, {"workspaces": 2})
    as_owner = Ctx(gw.pool, Actor.user(world.tenant_id, owner))
    ws = await workspaces.create_workspace(as_owner, world.tenant_id, slug=slug, display_name=slug)
    return dataclasses.replace(world, workspace_id=ws["id"], workspace=slug)


async def break_policies(gw: Gateway, url: str, world: World) -> None:
    """A workspace policy that no longer parses (written past the API, which checks it), and
    one send a minute per agent."""
    with psycopg.connect(url) as conn:
        conn.execute(
            """INSERT INTO policies (id, tenant_id, workspace_id, name, cedar, created_by)
               SELECT %s, %s, %s, 'broken', 'permit (principal', id FROM users
                WHERE tenant_id = %s LIMIT 1""",
            (uuid.uuid4(), world.tenant_id, world.workspace_id, world.tenant_id),
        )
    async with tenant_transaction(gw.pool, SCOPE, world.tenant_id) as conn:
        await plans.override_limits(
            conn, world.tenant_id, {"workspaces": 2, "publish_per_minute": 1}
        )


async def test_a_request_that_fails_in_a_shared_transaction_fails_alone(
    gateway: Gateway, agentbus_db: str, gateway_client: Any
) -> None:
    """Four agents of one workspace and one of a workspace whose policies no longer parse send
    in one round. The failure undoes the shared transaction; the four are then accepted one by
    one, with the one send a minute the tenant allows each: the tokens the undone transaction
    took were given back. The fifth is refused AB-4002 and leaves no row."""
    world = await make_world(gateway, "acme")
    fine = [await enroll(gateway_client, world, f"fine-{i}") for i in range(4)]
    broken_world = await other_workspace(gateway, world, "other")
    broken = [await enroll(gateway_client, broken_world, f"broken-{i}") for i in range(2)]
    await break_policies(gateway, agentbus_db, broken_world)
    envs = [signed(a, fine[(i + 1) % len(fine)]) for i, a in enumerate(fine)]
    envs.append(signed(broken[0], broken[1]))
    batches = [
        batch(await principal(gateway, agent), env)
        for agent, env in zip([*fine, broken[0]], envs, strict=True)
    ]
    undone = SEND_ROUNDS_UNDONE._value.get()
    done = await send_module._round(gateway, world.tenant_id, batches)
    assert SEND_ROUNDS_UNDONE._value.get() == undone + 1
    for asked in batches[:4]:
        ran = done[asked]
        assert isinstance(ran, send_module._Batch), ran
        assert [i for i, _, _ in ran.accepted] == [0], ran.answers
    failed = done[batches[4]]
    assert isinstance(failed, e.PolicyUnavailable), failed
    rows = stored(agentbus_db, [env["id"] for env in envs])
    assert set(rows) == {env["id"] for env in envs[:4]}


async def test_an_envelope_twice_in_one_round_is_accepted_then_replayed(
    gateway: Gateway, agentbus_db: str, gateway_client: Any
) -> None:
    """The same envelope twice in one round (a client's retry on a second connection): the
    first is accepted, the second is a replay of it, and one row exists."""
    world = await make_world(gateway, "acme")
    alice, bob = (
        await enroll(gateway_client, world, "alice"),
        await enroll(gateway_client, world, "bob"),
    )
    who = await principal(gateway, alice)
    env = signed(alice, bob)
    first, second = batch(who, env), batch(who, env)
    done = await send_module._round(gateway, world.tenant_id, [first, second])
    ran_first, ran_second = done[first], done[second]
    assert isinstance(ran_first, send_module._Batch)
    assert isinstance(ran_second, send_module._Batch)
    assert [i for i, _, _ in ran_first.accepted] == [0]
    assert [i for i, _, _, _ in ran_second.replays] == [0]
    assert not ran_second.accepted
    assert list(stored(agentbus_db, [env["id"]])) == [env["id"]]
