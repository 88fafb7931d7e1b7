"""The fleet's part of a server process: caches, the batcher, the NOTIFY listener and the
per-shard controllers, started and stopped by the app's lifespan (``start_fleet``)."""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
from uuid import UUID

from platformkit.db.scope import Conn, Pool, tenant_transaction
from platformkit.http.egress import networks
from psycopg import AsyncConnection
from starlette.applications import Starlette
from starlette.datastructures import State

from strataplane.actions.fleet_desired import refresh_agents
from strataplane.actions.fleet_inventory import relabel_host
from strataplane.agents.auth import AgentIdentity, CredentialCache, client_address
from strataplane.agents.batch import Batcher
from strataplane.agents.checkin_gate import CheckinGate
from strataplane.agents.crls import CrlCache
from strataplane.agents.elastic_quiet import QuietAgents
from strataplane.agents.settings import FleetSettings
from strataplane.agents.state import ArtifactBytes, StateCache
from strataplane.agents.telegraf_class import ClassTokens
from strataplane.controllers.fleet_loop import FleetControllers
from strataplane.db import SCOPE
from strataplane.store import fleet_notify, fleet_serving, fleet_zones
from strataplane.store.fleet_serving import ServingState

log = logging.getLogger(__name__)


class FleetRuntime:
    def __init__(self, pool: Pool, settings: FleetSettings, shards: int) -> None:
        self.pool, self.settings = pool, settings
        self.credentials = CredentialCache(pool, settings.credential_ttl)
        self.states = StateCache(pool, settings.state_ttl)
        self.classes = ClassTokens(pool, settings.credential_ttl)
        self.artifacts = ArtifactBytes(pool)
        self.crls = CrlCache(networks(settings.egress_allow), settings.crl_min_refresh)
        self.checkins = CheckinGate(settings.elastic_rounds, settings.elastic_queue)
        self.quiet = QuietAgents()
        self.batcher = Batcher(
            pool, settings.flush_interval, relabel=self._relabel, rerender=self._rerender
        )
        self.controllers = FleetControllers(pool, settings, shards)
        self._proxies = [ipaddress.ip_network(c, strict=False) for c in settings.proxy_from]
        self._listener: asyncio.Task[None] | None = None
        self.app_state = State()  # the app's state (services: the keyring for secrets)

    async def start(self) -> None:
        await self.batcher.start()
        self._listener = asyncio.create_task(self._listen(), name="fleet-listener")
        await self.controllers.start()

    async def stop(self) -> None:
        await self.controllers.stop()
        if self._listener is not None:
            self._listener.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._listener
        await self.batcher.stop()

    # -- hooks of the batcher ------------------------------------------------------------------

    async def _relabel(self, conn: Conn, tenant_id: UUID, hosts: list[UUID]) -> None:
        """Agents' source addresses moved: only zones can relabel their hosts."""
        if not await fleet_zones.has_zones(conn, tenant_id):
            return
        for host_id in hosts:
            await relabel_host(conn, tenant_id, host_id, self.settings.agent_url)

    async def _rerender(self, conn: Conn, tenant_id: UUID, agents: list[UUID]) -> None:
        await refresh_agents(conn, tenant_id, agents, self.settings.agent_url)

    # -- the slow paths of a poll ---------------------------------------------------------------

    async def version_reported(
        self, who: AgentIdentity, version: str, raw: str | None
    ) -> ServingState:
        """A new version in User-Agent: record it and render for it before answering."""
        async with tenant_transaction(self.pool, SCOPE, who.tenant_id) as conn:
            if await fleet_serving.set_version(conn, who.tenant_id, who.agent_id, version, raw):
                await refresh_agents(conn, who.tenant_id, [who.agent_id], self.settings.agent_url)
                await fleet_notify.agent_changed(conn, who.tenant_id, who.agent_id)
            state = await fleet_serving.serving_state(conn, who.tenant_id, who.agent_id)
        if state is None:
            from strataplane import errors

            raise errors.AuthRequired("the agent was forgotten")
        self.states.put(state)
        return state

    def served(self, state: ServingState) -> None:
        """A GET delivered the desired artifact: this replica's cache knows at once, the row
        and the other replicas (NOTIFY ``served:``) at the next flush."""
        assert state.desired_artifact is not None
        self.states.served_here(state.agent_id, state.desired_artifact)
        self.batcher.served(state.tenant_id, state.agent_id, state.desired_artifact)

    def source_ip(self, peer: str | None, forwarded_for: str | None) -> str | None:
        """The agent's address: the peer, or the client a trusted proxy forwarded."""
        if not self._proxies:
            return peer
        return client_address(peer, forwarded_for or "", self._proxies)

    # -- cache invalidation ---------------------------------------------------------------------

    async def _listen(self) -> None:
        conninfo = self.pool.conninfo
        if not isinstance(conninfo, str):
            raise TypeError("the fleet listener needs a pool with a plain conninfo")
        while True:
            try:
                async with await AsyncConnection.connect(conninfo, autocommit=True) as conn:
                    await conn.execute(f"LISTEN {fleet_notify.CHANNEL}")
                    self.states.clear()  # notices may have been missed while disconnected
                    self.credentials.clear()
                    self.classes.clear()
                    self.quiet.clear()
                    self.checkins.wake_all()
                    async for notice in conn.notifies():
                        self._on_notice(notice.payload)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.warning("fleet listener: %s; reconnecting", exc)
                await asyncio.sleep(1.0)

    def _on_notice(self, payload: str) -> None:
        kind, _, rest = payload.partition(":")
        try:
            if kind == "agent":
                tenant, agent = rest.split(":", 1)
                self.states.invalidate_agent(UUID(tenant), UUID(agent))
                self.quiet.agent_changed(UUID(tenant), UUID(agent))
                self.checkins.wake_agent(UUID(tenant), UUID(agent))
            elif kind == "agents":
                tenant, first, last = rest.split(":", 2)
                self.states.invalidate_range(UUID(tenant), UUID(first), UUID(last))
                self.quiet.range_changed(UUID(tenant), UUID(first), UUID(last))
                self.checkins.wake_range(UUID(tenant), UUID(first), UUID(last))
            elif kind == "tenant":
                self.states.invalidate_tenant(UUID(rest))
                self.quiet.tenant_changed(UUID(rest))
                self.checkins.wake_tenant(UUID(rest))
            elif kind == "credential":
                self.credentials.revoke(rest)
                self.classes.revoke(rest)
            elif kind == "served":
                tenant, artifact, agents = rest.split(":", 2)
                digest = bytes.fromhex(artifact)
                for agent in agents.split(","):
                    self.states.mark_served(UUID(tenant), UUID(agent), digest)
            elif kind == "release":
                self.controllers.wake(UUID(rest))
        except (ValueError, IndexError):
            log.warning("fleet listener: bad notice %r", payload)


async def start_fleet(app: Starlette, pool: Pool, shards: int) -> FleetRuntime:
    """Create and start the runtime on ``app.state.fleet``; settings from
    ``app.state.fleet_settings`` when a caller set them, else the environment."""
    state = app.state
    settings = getattr(state, "fleet_settings", None) or FleetSettings()
    state.fleet_settings = settings
    runtime = FleetRuntime(pool, settings, shards)
    runtime.app_state = state
    await runtime.start()
    state.fleet = runtime
    return runtime
