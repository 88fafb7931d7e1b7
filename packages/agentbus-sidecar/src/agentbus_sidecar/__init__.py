"""AgentBus sidecar and the ``agentbus`` CLI: envelopes, credentials, gateway client, and the
local store (inbox, outbox, dedupe) that makes delivery effectively once.

Never imports a server package: what it shares with the gateway is wirekit.
"""

from agentbus_sidecar.client import GatewayClient
from agentbus_sidecar.credentials import Credentials, load_credentials, save_credentials
from agentbus_sidecar.envelope import build_envelope, sign_envelope, verify_envelope
from agentbus_sidecar.errors import (
    ConfigError,
    EnvelopeError,
    GatewayError,
    GatewayUnreachable,
    SidecarError,
    SignatureInvalid,
    StoreError,
)
from agentbus_sidecar.ids import new_id
from agentbus_sidecar.runtime import Runtime, open_runtime
from agentbus_sidecar.store import open_store

__all__ = [
    "ConfigError",
    "Credentials",
    "EnvelopeError",
    "GatewayClient",
    "GatewayError",
    "GatewayUnreachable",
    "Runtime",
    "SidecarError",
    "SignatureInvalid",
    "StoreError",
    "build_envelope",
    "load_credentials",
    "new_id",
    "open_runtime",
    "open_store",
    "save_credentials",
    "sign_envelope",
    "verify_envelope",
]
