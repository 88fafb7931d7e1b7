"""What delivery keeps per gateway process, beside the ``Gateway`` it runs in: the ack-token
keys, the agents whose consumer this instance has verified, the breakers of
PostgreSQL and the object store (``breaker``), and the registry of open delivery connections
(one per agent: a newer one replaces the older, on any instance, through a core NATS subject
outside every tenant stream), which ``drain`` ends when the server is stopping.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription
from platformkit.db.outage import database_unreachable
from starlette.requests import HTTPConnection

from agentbus.broker import ACK_WAIT_S, Broker
from agentbus.delivery.breaker import Dependency
from agentbus.delivery.tokens import AckTokens
from agentbus.gateway.context import Gateway, get_gateway
from agentbus.gateway.domain.errors import BrokerUnavailable, ObjectStoreUnavailable
from agentbus.gateway.store.objectstore import ObjectMissing
from agentbus.gathered import Rounds

PROBE_KEY = "health/pulls-probe"
"""A key no object has: a working store answers a read of it with "missing"."""
PROBE_TIMEOUT_S = 2.0


def nats_client(broker: Broker) -> Client:
    """The broker's connection (delivery pulls and settles on it); AB-9003 while it is down."""
    nc: Client | None = getattr(broker, "nc", None) or getattr(broker, "_nc", None)
    if nc is None or not nc.is_connected:
        raise BrokerUnavailable("NATS is not connected; retry with backoff")
    return nc


def connection_subject(tenant_id: uuid.UUID, agent_id: uuid.UUID) -> str:
    """Announcements of new delivery connections; core NATS, outside ``t.<tenant>.>``."""
    return f"agentbus.delivery.connections.{tenant_id.hex}.{agent_id.hex}"


@dataclass(eq=False)  # by identity: the service's set of open connections holds them
class Connection:
    """One open long-poll or WebSocket; ``replaced`` is set when a newer one announces itself,
    ``draining`` when the server is stopping, ``ended`` on either or when its client has gone
    (a waiting pull stops on it)."""

    id: str
    replaced: asyncio.Event = field(default_factory=asyncio.Event)
    draining: asyncio.Event = field(default_factory=asyncio.Event)
    ended: asyncio.Event = field(default_factory=asyncio.Event)

    def drain(self) -> None:
        self.draining.set()
        self.ended.set()


_HANDED_MAX = 50000


@dataclass
class DeliveryService:
    gateway: Gateway
    tokens: AckTokens
    ready: set[uuid.UUID] = field(default_factory=set)
    handed: dict[tuple[uuid.UUID, uuid.UUID, uuid.UUID], tuple[float, str]] = field(
        default_factory=dict, repr=False
    )
    """(tenant, agent, message) -> (deadline, JetStream reply subject) of the copies this
    process handed out, for AckWait: an application ack (read) that also fills the transport
    ack settles the JetStream copy with it, as a transport ack would."""

    pending: dict[tuple[uuid.UUID, uuid.UUID], int] = field(default_factory=dict, repr=False)
    """(tenant, agent) -> the consumer's ``num_pending`` as the last pull here saw it (from the
    ack subject of its last copy; 0 after a pull that found nothing), taken by the answer's
    ``pending_estimate`` instead of asking JetStream."""

    store: Dependency = field(init=False, repr=False)
    database: Dependency = field(init=False, repr=False)
    """What pulls need besides NATS; while either is down, pulls take nothing from JetStream."""

    rounds: Rounds = field(default_factory=Rounds, repr=False)
    """This process's group commits, by name: pulls (``pull._in_round``), acks and reads
    (``settle._in_round``)."""

    open: set[Connection] = field(default_factory=set, repr=False)
    draining: bool = False
    """The server is stopping (``platformkit.http.drain``): open connections were ended, and a
    new one ends at once (a pull then answers what is there without waiting)."""

    def drain(self) -> None:
        self.draining = True
        for conn in self.open:
            conn.drain()

    def __post_init__(self) -> None:
        where = self.gateway.objects.description
        self.store = Dependency(f"object store {where}", self._store_answers)
        self.database = Dependency("PostgreSQL", self._database_answers)

    async def pulls_may_go_on(self, wait_s: float, stop: asyncio.Event | None) -> bool:
        """True at once while PostgreSQL and the object store answer. While either is down
        (``breaker``), a probe of it when one is due; otherwise (or when the probe failed) a wait
        of up to ``wait_s``, or until ``stop``, for the poll to answer empty, then False."""
        needed = (self.database, self.store)
        if all(dep.breaker.closed for dep in needed):
            return True
        now = time.monotonic()
        if all([await dep.answers(now) for dep in needed]):
            return True
        now = time.monotonic()
        pause = min([wait_s] + [d.breaker.until_probe(now) for d in needed if not d.breaker.closed])
        if pause > 0:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for((stop or asyncio.Event()).wait(), pause)
        return False

    async def _store_answers(self) -> bool:
        try:
            await self.gateway.objects.get(PROBE_KEY)
        except ObjectMissing:
            return True  # what a working store answers
        except ObjectStoreUnavailable:
            return False
        return True

    async def _database_answers(self) -> bool:
        try:
            async with self.gateway.pool.connection(timeout=PROBE_TIMEOUT_S) as conn:
                await conn.execute("SELECT 1")
        except Exception as exc:
            if database_unreachable(exc):
                return False
            raise
        return True

    def remember_handed(
        self, tenant_id: uuid.UUID, agent_id: uuid.UUID, msg_id: uuid.UUID, reply: str
    ) -> None:
        now = time.monotonic()
        if len(self.handed) >= _HANDED_MAX:
            for key in [k for k, (deadline, _) in self.handed.items() if deadline <= now]:
                del self.handed[key]
            if len(self.handed) >= _HANDED_MAX:
                self.handed.clear()
        self.handed[(tenant_id, agent_id, msg_id)] = (now + ACK_WAIT_S, reply)

    def take_handed(
        self, tenant_id: uuid.UUID, agent_id: uuid.UUID, msg_id: uuid.UUID
    ) -> str | None:
        """The reply subject of a copy handed out here within AckWait, forgotten on the way."""
        hit = self.handed.pop((tenant_id, agent_id, msg_id), None)
        if hit is None or hit[0] <= time.monotonic():
            return None
        return hit[1]

    @contextlib.asynccontextmanager
    async def connection(self, tenant_id: uuid.UUID, agent_id: uuid.UUID) -> Any:
        """Announce a new delivery connection and watch for a newer one."""
        nc = nats_client(self.gateway.broker)
        conn = Connection(uuid.uuid4().hex)
        subject = connection_subject(tenant_id, agent_id)

        async def on_announce(msg: Msg) -> None:
            if msg.data.decode() != conn.id:
                conn.replaced.set()
                conn.ended.set()

        sub: Subscription = await nc.subscribe(subject, cb=on_announce)
        self.open.add(conn)
        if self.draining:
            conn.drain()
        try:
            await nc.publish(subject, conn.id.encode())
            yield conn
        finally:
            self.open.discard(conn)
            with contextlib.suppress(Exception):
                await sub.unsubscribe()


def service_of(conn: HTTPConnection) -> DeliveryService:
    """The app's delivery service, created on first use from its ``Gateway``."""
    service = getattr(conn.app.state, "delivery", None)
    if isinstance(service, DeliveryService):
        return service
    gw = get_gateway(conn)
    service = build_service(gw)
    conn.app.state.delivery = service
    return service


def build_service(gw: Gateway) -> DeliveryService:
    return DeliveryService(gw, AckTokens.from_keyring(gw.keyring))
