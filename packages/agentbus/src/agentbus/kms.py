"""Key encryption keys behind one small protocol (data model §5.1, §5.4): who wraps a tenant's
data keys.

A tenant's ``tenants.kek_ref`` names its KEK:

- ``kms://platform/deployment-keyring`` (the default): the deployment keyring, a 0600 file
  (``LocalKeyring``); a wrapped key's row names the keyring key, ``.../<key id>``;
- ``kms://aws/<key ARN>`` (bring your own key): the customer's AWS KMS key, reached with boto3
  (``AwsKms``), enabled by ``AGENTBUS_KMS_AWS_REGION`` (and ``AGENTBUS_KMS_AWS_ENDPOINT_URL``
  for a VPC endpoint or a test server). Credentials are boto3's usual chain (environment,
  profile, instance role): the service principal the customer grants Encrypt and Decrypt on
  that key. Every wrap and unwrap carries the encryption context ``agentbus:tenant`` = the
  tenant's uuid, so a wrapped key cannot be replayed for another tenant, and it shows in the
  customer's KMS audit trail.

``KeyProviders.for_ref`` picks the provider of a reference. A provider answers
``KeyProviderError`` when the key cannot be used (unknown, revoked, unreachable); the gateway
turns that into AB-9020 on payload operations.
"""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass
from typing import Any, Protocol

from platformkit.crypto import Keyring, KeyringError, UnwrapError, WrappedDataKey
from platformkit.crypto import unwrap_material as keyring_unwrap
from platformkit.crypto import wrap_material as keyring_wrap

from agentbus.settings import Settings

PLATFORM_KEK = "kms://platform/deployment-keyring"
AWS_PREFIX = "kms://aws/"
CONTEXT_KEY = "agentbus:tenant"


class KeyProviderError(Exception):
    """The KEK cannot wrap or unwrap now; the message names the key, never a credential."""


def kek_ref_for(kek_id: int) -> str:
    return f"{PLATFORM_KEK}/{kek_id}"


def kek_id_of(kek_ref: str) -> int:
    head, _, tail = kek_ref.rpartition("/")
    if head != PLATFORM_KEK or not tail.isdigit():
        raise KeyringError(f"{kek_ref!r} is not a platform keyring reference")
    return int(tail)


class KeyProvider(Protocol):
    name: str
    """``tenant_keys.kek_provider`` of the keys it wraps."""

    def current(self, row_ref: str, tenant_ref: str) -> bool:
        """Whether a key wrapped under ``row_ref`` is wrapped under the tenant's current KEK."""
        ...

    async def wrap_key(
        self, tenant_ref: str, tenant_id: uuid.UUID, material: bytes
    ) -> tuple[str, bytes]:
        """``(row kek_ref, wrapped)`` of ``material`` under the tenant's KEK."""
        ...

    async def unwrap(self, row_ref: str, tenant_id: uuid.UUID, wrapped: bytes) -> bytes: ...


@dataclass
class LocalKeyring:
    keyring: Keyring
    name: str = "platform"

    def current(self, row_ref: str, tenant_ref: str) -> bool:
        return tenant_ref == PLATFORM_KEK and row_ref == kek_ref_for(self.keyring.active_id)

    async def wrap_key(
        self, tenant_ref: str, tenant_id: uuid.UUID, material: bytes
    ) -> tuple[str, bytes]:
        wrapped = keyring_wrap(self.keyring, tenant_id, material)
        return kek_ref_for(wrapped.kek_id), wrapped.wrapped

    async def unwrap(self, row_ref: str, tenant_id: uuid.UUID, wrapped: bytes) -> bytes:
        try:
            found = WrappedDataKey(kek_id_of(row_ref), wrapped)
            return keyring_unwrap(self.keyring, found, tenant_id)
        except (UnwrapError, KeyringError) as exc:
            raise KeyProviderError(f"the deployment keyring does not open {row_ref}") from exc


def aws_key_of(ref: str) -> str:
    if not ref.startswith(AWS_PREFIX) or len(ref) == len(AWS_PREFIX):
        raise KeyProviderError(f"{ref!r} is not an AWS KMS key reference (kms://aws/<key ARN>)")
    return ref[len(AWS_PREFIX) :]


@dataclass
class AwsKms:
    """AWS KMS through boto3; calls run in a thread (boto3 blocks), each bounded by
    ``timeout_s`` and one retry, so an unreachable KMS answers within seconds."""

    region: str
    endpoint_url: str | None = None
    timeout_s: float = 5.0
    name: str = "aws_kms"

    def __post_init__(self) -> None:
        import boto3
        from botocore.config import Config

        config = Config(
            connect_timeout=self.timeout_s, read_timeout=self.timeout_s,
            retries={"max_attempts": 2, "mode": "standard"},
        )  # fmt: skip
        self._client: Any = boto3.client(
            "kms", region_name=self.region, endpoint_url=self.endpoint_url, config=config
        )

    def current(self, row_ref: str, tenant_ref: str) -> bool:
        return row_ref == tenant_ref

    async def _call(self, operation: str, **kwargs: Any) -> dict[str, Any]:
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            answer: dict[str, Any] = await asyncio.to_thread(
                getattr(self._client, operation), **kwargs
            )
        except ClientError as exc:
            code = exc.response.get("Error", {}).get("Code", "error")
            key = kwargs["KeyId"]
            raise KeyProviderError(f"AWS KMS refused {operation} with {key}: {code}") from exc
        except BotoCoreError as exc:
            raise KeyProviderError(f"AWS KMS did not answer ({type(exc).__name__})") from exc
        return answer

    async def wrap_key(
        self, tenant_ref: str, tenant_id: uuid.UUID, material: bytes
    ) -> tuple[str, bytes]:
        answer = await self._call(
            "encrypt", KeyId=aws_key_of(tenant_ref), Plaintext=material,
            EncryptionContext={CONTEXT_KEY: str(tenant_id)},
        )  # fmt: skip
        return tenant_ref, bytes(answer["CiphertextBlob"])

    async def unwrap(self, row_ref: str, tenant_id: uuid.UUID, wrapped: bytes) -> bytes:
        answer = await self._call(
            "decrypt", KeyId=aws_key_of(row_ref), CiphertextBlob=wrapped,
            EncryptionContext={CONTEXT_KEY: str(tenant_id)},
        )  # fmt: skip
        return bytes(answer["Plaintext"])


@dataclass
class KeyProviders:
    local: LocalKeyring
    aws: AwsKms | None = None

    def for_ref(self, ref: str) -> KeyProvider:
        if ref == PLATFORM_KEK or ref.startswith(PLATFORM_KEK + "/"):
            return self.local
        if ref.startswith(AWS_PREFIX):
            aws_key_of(ref)
            if self.aws is None:
                raise KeyProviderError(
                    "AWS KMS is not configured on this gateway (set AGENTBUS_KMS_AWS_REGION)"
                )
            return self.aws
        raise KeyProviderError(f"{ref!r} names no key provider this gateway has")


def providers_from(settings: Settings, keyring: Keyring) -> KeyProviders:
    """The keyring, and AWS KMS when its region is configured."""
    aws = None
    if settings.kms_aws_region:
        aws = AwsKms(settings.kms_aws_region, settings.kms_aws_endpoint_url)
    return KeyProviders(LocalKeyring(keyring), aws)
