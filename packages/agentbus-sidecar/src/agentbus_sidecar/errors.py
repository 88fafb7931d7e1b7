"""The sidecar's exception tree.

    SidecarError        [failed]              base of everything the sidecar raises on purpose
    +-- ConfigError     [config]              credentials missing, unreadable, insecure, incomplete
    +-- StoreError      [store]               state.db cannot be used (e.g. a newer sidecar's)
    +-- EnvelopeError   [envelope]            an envelope cannot be built or is malformed
    +-- SignatureInvalid [signature.invalid]  an envelope signature does not verify
    +-- GatewayUnreachable [network]          no HTTP answer: connection refused, DNS, TLS, timeout
    +-- GatewayError    [the AB- code]        the gateway answered with an error (problem+json)

The code in brackets is what ``agentbus`` prints (``error: <code>: <message>``) and puts in its
``--json`` error; only ``network`` means offline.

GatewayError carries the stable AB- ``code``, its ``name``, the HTTP ``status`` and the
problem's ``detail``; ``retryable`` says whether the outbox should try again (5xx and 429), and
``caller_refused`` whether the gateway refused the caller rather than judging the envelope, and
``token_refused`` whether that refusal was of the integration token itself (unknown, revoked,
expired): nothing this agent sends can succeed until someone installs a new token.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "ConfigError",
    "EnvelopeError",
    "GatewayError",
    "GatewayUnreachable",
    "SidecarError",
    "SignatureInvalid",
    "StoreError",
]


TOKEN_REFUSALS = frozenset({"AB-1002", "AB-1003", "AB-1004"})


class SidecarError(Exception):
    """Base class of the sidecar's deliberate errors; ``code`` is stable (the CLI prints it)."""

    code: str | None = "failed"


class ConfigError(SidecarError):
    code = "config"


class StoreError(SidecarError):
    code = "store"


class EnvelopeError(SidecarError, ValueError):
    code = "envelope"


class SignatureInvalid(SidecarError):
    code = "signature.invalid"


class GatewayUnreachable(SidecarError):
    code, exit_code = "network", 3

    def __init__(self, url: str, reason: str) -> None:
        super().__init__(f"gateway unreachable at {url}: {reason}")
        self.url = url
        self.reason = reason


class GatewayError(SidecarError):
    def __init__(
        self,
        status: int,
        code: str | None,
        name: str | None,
        detail: str,
        *,
        retry_after_ms: int | None = None,
        problem: dict[str, Any] | None = None,
    ) -> None:
        label = " ".join(part for part in (code, name) if part) or f"HTTP {status}"
        super().__init__(f"{label}: {detail}" if detail else label)
        self.status = status
        self.code = code
        self.name = name
        self.detail = detail
        self.retry_after_ms = retry_after_ms
        self.problem = problem or {}

    @property
    def retryable(self) -> bool:
        return self.status == 429 or self.status >= 500

    @property
    def caller_refused(self) -> bool:
        """The gateway refused who called (AB-10xx: token, credential, key proof, clock, role)
        before judging any envelope: the envelopes themselves may still be accepted later."""
        return (self.code or "").startswith("AB-10")

    @property
    def token_refused(self) -> bool:
        """The integration token (or the one behind the agent credential) is unknown, revoked
        or expired (AB-1002, AB-1003, AB-1004): retrying cannot help, `agentbus login` can."""
        return self.code in TOKEN_REFUSALS

    @property
    def clock_skew(self) -> bool:
        """A key proof's time was too far from the gateway's (AB-1012); the response that said
        so has corrected the clock offset, so a fresh proof is accepted."""
        return self.code == "AB-1012"

    @property
    def credential_rejected(self) -> bool:
        """The agent credential was refused and a fresh one may succeed."""
        return self.status == 401 and self.code in (None, "AB-1005", "AB-1006")
