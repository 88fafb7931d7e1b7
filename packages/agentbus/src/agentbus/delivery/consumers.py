"""The agent's JetStream consumer as delivery needs it: verified (and created if missing) on
the first fetch of each agent in this process (05 §2.3), and its backlog for
``pending_estimate``."""

from __future__ import annotations

import nats.errors
from platformkit.db.scope import tenant_transaction

from agentbus.broker import consumer_name, stream_name
from agentbus.db import SCOPE
from agentbus.delivery.service import DeliveryService
from agentbus.gateway.actions.publish import ensure_tenant_stream
from agentbus.gateway.api.principals import AgentPrincipal
from agentbus.gateway.domain.errors import BrokerUnavailable
from agentbus.gateway.store.agents import get_agent


async def ensure_consumer(svc: DeliveryService, who: AgentPrincipal) -> None:
    if who.agent_id in svc.ready:
        return
    async with tenant_transaction(svc.gateway.pool, SCOPE, who.tenant_id) as conn:
        agent = await get_agent(conn, who.tenant_id, who.agent_id)
    if agent is None:
        return
    try:
        await ensure_tenant_stream(svc.gateway, who.tenant_id)
        await svc.gateway.broker.ensure_consumer(who.tenant_id, agent)
    except (ConnectionError, TimeoutError, nats.errors.Error) as exc:
        raise BrokerUnavailable("the agent's consumer cannot be verified") from exc
    svc.ready.add(who.agent_id)


def forget_consumer(svc: DeliveryService, who: AgentPrincipal) -> None:
    """The consumer vanished (deleted behind our back, or with its stream when NATS lost its
    data): verify it and the tenant stream again on the next fetch, creating what is gone."""
    svc.ready.discard(who.agent_id)
    svc.gateway.broker.forget(who.tenant_id)


async def pending_estimate(svc: DeliveryService, who: AgentPrincipal) -> int | None:
    """Messages still waiting in the agent's consumer (JetStream's ``num_pending``): as the
    pull just made for this agent saw it, else asked of JetStream."""
    seen = svc.pending.pop((who.tenant_id, who.agent_id), None)
    if seen is not None:
        return seen
    try:
        info = await svc.gateway.broker.js.consumer_info(
            stream_name(who.tenant_id), consumer_name(who.agent_id)
        )
    except Exception:
        return None
    return int(info.num_pending or 0)
