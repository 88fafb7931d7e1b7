"""The z4j agent wire protocol, version 2: frame shapes, signing and replay checks.

Dependency-free apart from ``wirekit`` so the brain can import it without pulling the agent's
Celery integration, and the agent never imports the brain.
"""

from z4j_agent.protocol.frames import (
    CLOSE_BAD_HELLO,
    CLOSE_BAD_SIGNATURE,
    CLOSE_BAD_TOKEN,
    CLOSE_RATE_LIMITED,
    CLOSE_REPLACED,
    CLOSE_REVOKED,
    CLOSE_UNSUPPORTED_PROTOCOL,
    LONE_SURROGATE,
    MAX_BATCH_EVENTS,
    MAX_FRAME_BYTES,
    NONCE_MEMORY_SECONDS,
    PROTOCOL_VERSION,
    SIGNED_TYPES,
    SKEW_SECONDS,
    FrameError,
    FrameSigner,
    FrameVerifier,
    Session,
    decode_secret,
    encode_secret,
    format_ts,
    new_frame_id,
    parse_ts,
    unsigned_frame,
)

__all__ = [
    "CLOSE_BAD_HELLO",
    "CLOSE_BAD_SIGNATURE",
    "CLOSE_BAD_TOKEN",
    "CLOSE_RATE_LIMITED",
    "CLOSE_REPLACED",
    "CLOSE_REVOKED",
    "CLOSE_UNSUPPORTED_PROTOCOL",
    "LONE_SURROGATE",
    "MAX_BATCH_EVENTS",
    "MAX_FRAME_BYTES",
    "NONCE_MEMORY_SECONDS",
    "PROTOCOL_VERSION",
    "SIGNED_TYPES",
    "SKEW_SECONDS",
    "FrameError",
    "FrameSigner",
    "FrameVerifier",
    "Session",
    "decode_secret",
    "encode_secret",
    "format_ts",
    "new_frame_id",
    "parse_ts",
    "unsigned_frame",
]
