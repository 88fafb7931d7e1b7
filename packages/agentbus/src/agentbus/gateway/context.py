"""What a running gateway holds: the pool, the keyring, the broker, the object store, the
signing keys, the policy, and the per-instance caches. One ``Gateway`` per process, on
``app.state.gateway``; routes reach it with ``get_gateway(request)``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from platformkit.crypto import Keyring
from platformkit.db.scope import Pool
from platformkit.mail import Mailer
from starlette.requests import HTTPConnection

from agentbus.broker import Broker
from agentbus.gateway.actions.policy import PolicyEngine
from agentbus.gateway.actions.receipts import ReceiptWrites
from agentbus.gateway.actions.send_limits import SendLimits
from agentbus.gateway.actions.signing import SigningKeys
from agentbus.gateway.api.principals import PrincipalCache
from agentbus.gateway.api.request_limits import RequestLimits
from agentbus.gateway.config import GatewaySettings
from agentbus.gateway.domain.proofs import ProofReplayCache
from agentbus.gateway.store.directory import Directory
from agentbus.gateway.store.objectstore import ObjectStore
from agentbus.gathered import Rounds
from agentbus.keys import TenantKeyStore
from agentbus.kms import providers_from
from agentbus.tenant_crypto import TenantCrypto

if TYPE_CHECKING:
    from agentbus.analytics.backends import Backend
    from agentbus.gateway.actions.hooks import TaskRules


@dataclass
class Gateway:
    settings: GatewaySettings
    pool: Pool
    keyring: Keyring
    broker: Broker
    objects: ObjectStore
    signing: SigningKeys
    policy: PolicyEngine = field(default_factory=PolicyEngine)
    task_rules: TaskRules | None = None
    analytics: Backend | None = None  # None: this process does not own the analytics store
    proofs: ProofReplayCache = field(default_factory=ProofReplayCache)
    principals: PrincipalCache = field(init=False)
    directory: Directory = field(init=False)
    receipts: ReceiptWrites = field(init=False)
    rounds: Rounds = field(default_factory=Rounds, repr=False)  # group commits: sends
    limits: SendLimits = field(default_factory=SendLimits)
    request_limits: RequestLimits = field(default_factory=RequestLimits)
    crypto: TenantCrypto = field(init=False)
    mailer: Mailer = field(init=False)
    data_keys: TenantKeyStore = field(init=False)

    def __post_init__(self) -> None:
        self.request_limits.enforce = self.settings.request_rate_limits
        self.principals = PrincipalCache(self.pool)
        self.directory = Directory(self.pool)
        self.receipts = ReceiptWrites(self.pool)
        # Payloads use the tenant data keys of tenant_keys (data model §5), unwrapped by the
        # tenant's KEK provider; an unwrapped key is kept for 10 minutes by default (§5.2), and
        # only while its row is unchanged.
        self.mailer = self.settings.mailer()
        self.data_keys = TenantKeyStore(self.pool)
        self.crypto = TenantCrypto(
            self.pool, self.data_keys, providers_from(self.settings, self.keyring),
            ttl_s=self.settings.unwrapped_key_ttl_s,
        )  # fmt: skip


def get_gateway(conn: HTTPConnection) -> Gateway:
    """The gateway of the app serving ``conn`` (a Request or a WebSocket)."""
    gateway = getattr(conn.app.state, "gateway", None)
    if not isinstance(gateway, Gateway):
        raise RuntimeError("the gateway is not started (app lifespan not run)")
    return gateway
