"""Envelope encryption: deployment keyring -> per-tenant data keys -> sealed values.

``keyring`` owns the deployment key file, ``datakeys`` the per-tenant data keys and their
store, ``envelope`` the sealed format and the service that ties the three together.
"""

from platformkit.crypto.datakeys import (
    DataKey,
    DataKeyStore,
    InMemoryDataKeyStore,
    StoredDataKey,
    TenantId,
    UnwrapError,
    WrappedDataKey,
    new_data_key,
    unwrap_data_key,
    unwrap_material,
    wrap_material,
)
from platformkit.crypto.envelope import (
    DataKeyUnavailableError,
    DecryptionError,
    Envelope,
    open_sealed,
    seal,
    sealed_key_id,
)
from platformkit.crypto.keyring import (
    DeploymentKey,
    Keyring,
    KeyringError,
    generate_keyring,
    load_or_create_keyring,
)

__all__ = [
    "DataKey",
    "DataKeyStore",
    "DataKeyUnavailableError",
    "DecryptionError",
    "DeploymentKey",
    "Envelope",
    "InMemoryDataKeyStore",
    "Keyring",
    "KeyringError",
    "StoredDataKey",
    "TenantId",
    "UnwrapError",
    "WrappedDataKey",
    "generate_keyring",
    "load_or_create_keyring",
    "new_data_key",
    "open_sealed",
    "seal",
    "sealed_key_id",
    "unwrap_data_key",
    "unwrap_material",
    "wrap_material",
]
