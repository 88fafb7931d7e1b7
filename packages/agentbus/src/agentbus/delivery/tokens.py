"""Ack tokens (04-API-SPEC.md §5.1): the JetStream reply subject of one delivery plus an HMAC.

Form: ``v1.<key id>.<base64url(reply subject)>.<base64url(HMAC-SHA256)>``, at most 512 chars.
The MAC covers the tenant, the agent, the message id and the reply subject, so a token acts
only on the delivery it was minted for and only for the agent it was handed to; any gateway
instance can check it because the MAC key derives from the deployment keyring every instance
shares. The reply subject itself names the stream (``T_<tenant hex>``) and the consumer
(``agt_<agent hex>``), which are checked too.

Key derivation: the keyring never hands out key material, only AES-256-GCM under it, so the MAC
key is HKDF-SHA256 over the GCM encryption of a fixed label under a fixed all-zero nonce: a
deterministic pseudorandom function of the deployment key. The all-zero nonce is used for this
one fixed plaintext only (data sealed by the kernel uses random nonces).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import uuid
from dataclasses import dataclass

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from platformkit.crypto import Keyring

LABEL = b"agentbus.delivery.ack-token.v1"
MAX_LENGTH = 512


class InvalidAckToken(ValueError):
    """The token is malformed, forged, or minted for another delivery or agent."""


@dataclass(frozen=True)
class AckSubject:
    """The parts of a JetStream ack subject (``$JS.ACK.<stream>.<consumer>.<delivered>.<seq>..``,
    or the longer form with domain and account hash)."""

    reply: str
    stream: str
    consumer: str
    delivered: int
    stream_seq: int
    pending: int  # messages left in the consumer after this one when it was delivered


def parse_ack_subject(reply: str) -> AckSubject:
    tokens = reply.split(".")
    if len(tokens) < 9 or tokens[:2] != ["$JS", "ACK"]:
        raise InvalidAckToken("not a JetStream ack subject")
    base = 2 if len(tokens) == 9 else 4  # v2 adds <domain>.<account hash> after $JS.ACK
    try:
        delivered, seq = int(tokens[base + 2]), int(tokens[base + 3])
        pending = int(tokens[base + 6])
    except (IndexError, ValueError):
        raise InvalidAckToken("not a JetStream ack subject") from None
    return AckSubject(reply, tokens[base], tokens[base + 1], delivered, seq, pending)


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    """Strict: only the canonical encoding decodes, so no two token strings are equivalent."""
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (ValueError, TypeError):
        raise InvalidAckToken("malformed token") from None
    if _b64(raw) != text:
        raise InvalidAckToken("malformed token")
    return raw


def derive_secret(keyring: Keyring, key_id: int) -> bytes:
    stream = keyring.get(key_id).aead().encrypt(b"\x00" * 12, LABEL, None)
    return HKDF(hashes.SHA256(), 32, salt=None, info=LABEL).derive(stream)


class AckTokens:
    """Mints tokens under the keyring's active key; checks tokens of any key it holds."""

    def __init__(self, secrets: dict[int, bytes], active: int) -> None:
        if active not in secrets:
            raise ValueError("the active key id must have a secret")
        self._secrets, self._active = dict(secrets), active

    @classmethod
    def from_keyring(cls, keyring: Keyring) -> AckTokens:
        secrets = {kid: derive_secret(keyring, kid) for kid in keyring.ids}
        return cls(secrets, keyring.active_id)

    @staticmethod
    def _mac(
        secret: bytes, tenant: uuid.UUID, agent: uuid.UUID, msg: uuid.UUID, reply: str
    ) -> bytes:
        bound = b"|".join((tenant.bytes, agent.bytes, msg.bytes, reply.encode()))
        return hmac.new(secret, bound, hashlib.sha256).digest()

    def mint(self, tenant: uuid.UUID, agent: uuid.UUID, msg: uuid.UUID, reply: str) -> str:
        mac = self._mac(self._secrets[self._active], tenant, agent, msg, reply)
        token = f"v1.{self._active}.{_b64(reply.encode())}.{_b64(mac)}"
        if len(token) > MAX_LENGTH:
            raise ValueError("reply subject too long for an ack token")
        return token

    def verify(
        self, token: object, tenant: uuid.UUID, agent: uuid.UUID, msg: uuid.UUID
    ) -> AckSubject:
        """The delivery's ack subject; InvalidAckToken unless minted for exactly these ids."""
        if not isinstance(token, str) or len(token) > MAX_LENGTH:
            raise InvalidAckToken("malformed token")
        parts = token.split(".")
        if len(parts) != 4 or parts[0] != "v1" or not parts[1].isdigit():
            raise InvalidAckToken("malformed token")
        secret = self._secrets.get(int(parts[1]))
        if secret is None:
            raise InvalidAckToken("unknown token key")
        try:
            reply = _unb64(parts[2]).decode("ascii")
        except UnicodeDecodeError:
            raise InvalidAckToken("malformed token") from None
        if not hmac.compare_digest(self._mac(secret, tenant, agent, msg, reply), _unb64(parts[3])):
            raise InvalidAckToken("token does not verify")
        subject = parse_ack_subject(reply)
        if subject.stream != f"T_{tenant.hex}" or subject.consumer != f"agt_{agent.hex}":
            raise InvalidAckToken("token names another stream or consumer")
        return subject
