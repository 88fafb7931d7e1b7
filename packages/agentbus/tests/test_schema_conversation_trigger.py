"""conversations.participants, message_count and last_message_at follow messages inserts
(the trigger the model names), inside the tenant's scope as the gateway role, when the inserting
transaction commits."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

from agentbus import db
from agentbus.testing import seed_tenant
from platformkit.db.scope import Pool, tenant_transaction
from platformkit.ids import uuid7

INSERT = """INSERT INTO messages (id, tenant_id, workspace_id, conversation_id, type, schema_url,
    from_agent_id, to_agent_id, to_address, traceparent, sig, signing_key_id, payload_ref,
    payload_bytes, payload_sha256, dek_version, accepted_at)
    SELECT %(id)s, tenant_id, workspace_id, id, 'agentbus.message.v1', 'https://x', %(frm)s,
           %(to)s, 'agent://x/y/z', '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01',
           '\\x00', %(frm)s, 'k', 1, '\\x00', 1, %(at)s
      FROM conversations"""


async def test_message_insert_updates_its_conversation(
    agentbus_db: str, agentbus_app_pool: Pool
) -> None:
    tenant, _ = await seed_tenant(agentbus_db, "tenant-a")
    other, there = uuid7(), uuid.uuid4()
    now = datetime.now(UTC)
    async with tenant_transaction(agentbus_app_pool, db.SCOPE, tenant) as conn:
        before = await (
            await conn.execute("SELECT participants, message_count, started_by FROM conversations")
        ).fetchone()
        assert before is not None
        agent = before["started_by"]
        # The seed's message went from the agent to itself: one participant, one message.
        assert (before["participants"], before["message_count"]) == ([agent], 1)
        await conn.execute(INSERT, {"id": uuid7(), "frm": agent, "to": other, "at": now})
        await conn.execute(INSERT, {"id": uuid7(), "frm": other, "to": agent, "at": now})
        await conn.execute(
            INSERT, {"id": uuid7(), "frm": agent, "to": there, "at": now - timedelta(minutes=1)}
        )
    async with tenant_transaction(agentbus_app_pool, db.SCOPE, tenant) as conn:
        after = await (
            await conn.execute(
                "SELECT participants, message_count, last_message_at FROM conversations"
            )
        ).fetchone()
    assert after is not None
    assert after["participants"] == [agent, other, there]
    assert after["message_count"] == 4
    assert after["last_message_at"] == now


async def test_an_open_send_does_not_hold_up_another_to_the_same_conversation(
    agentbus_db: str, agentbus_app_pool: Pool
) -> None:
    tenant, _ = await seed_tenant(agentbus_db, "tenant-a")
    now = datetime.now(UTC)
    async with tenant_transaction(agentbus_app_pool, db.SCOPE, tenant) as first:
        agent = (await (await first.execute("SELECT started_by FROM conversations")).fetchone())[
            "started_by"
        ]
        await first.execute(INSERT, {"id": uuid7(), "frm": agent, "to": agent, "at": now})
        # still open: the second insert must not wait for this transaction's conversation lock
        async with tenant_transaction(agentbus_app_pool, db.SCOPE, tenant) as second:
            await second.execute("SET LOCAL lock_timeout = '500ms'")
            await second.execute(INSERT, {"id": uuid7(), "frm": agent, "to": agent, "at": now})
    async with tenant_transaction(agentbus_app_pool, db.SCOPE, tenant) as conn:
        row = await (await conn.execute("SELECT message_count FROM conversations")).fetchone()
    assert row is not None
    assert row["message_count"] == 3
