"""The secrets' errors (the StrataplaneError tree of strataplane.errors, extended here).
None of them ever carries a value: only names, versions and reasons."""

from __future__ import annotations

from strataplane.errors import Conflict, InvalidInput, NotFound, StrataplaneError


class SecretNotFound(NotFound):
    code, title = "secret.not_found", "No such Secret in this tenant"


class SecretVersionNotFound(NotFound):
    code, title = "secret_version.not_found", "No such version of this Secret"


class SecretInSpec(Conflict):
    code, title = "secret.in_spec", "The Secret is still in the latest revision"


class SecretVersionEnabled(Conflict):
    code, title = "secret_version.enabled", "Disable the version before deleting it"


class SecretHasNoValue(Conflict):
    code, title = "secret.no_value", "The Secret has no version yet"


class InvalidSecretName(InvalidInput):
    code, title = "secret.invalid_name", "Invalid Secret name"


class InvalidSecretValue(InvalidInput):
    code, title = "secret.invalid_value", "Invalid Secret value"


class KeyringMismatch(StrataplaneError):
    """The keyring file does not hold the keys the database recorded (a wrong file)."""

    code, status, title = "keyring.mismatch", 503, "The keyring does not match the database"


class SecretUnreadable(StrataplaneError):
    """A sealed value does not open: its tenant's keys are gone, or the keyring lacks a key."""

    code, status, title = "secret.unreadable", 503, "The secret value cannot be decrypted"


class SecretWithheld(StrataplaneError):
    """A configuration refers to a Secret the agent may not receive (grant, minAssurance) or
    that has no value: it is not served at all rather than served without the value."""

    code, status, title = (
        "secret.withheld",
        403,
        "The configuration needs a secret withheld from this agent",
    )


class AgentQuarantined(StrataplaneError):
    code, status, title = "agent.quarantined", 403, "The agent is quarantined: no secrets"


class TrustAnchorNotFound(NotFound):
    code, title = "trust_anchor.not_found", "Trust anchor not found"


class TrustAnchorNameTaken(Conflict):
    code, title = "trust_anchor.name_taken", "A trust anchor of this tenant has this name"


class InvalidTrustAnchor(InvalidInput):
    code, title = "trust_anchor.invalid", "Invalid trust anchor"


class CertificateRequired(StrataplaneError):
    code, status, title = (
        "agent.certificate_required",
        403,
        "This agent's bound client certificate is required",
    )


class AuditSinkNotFound(NotFound):
    code, title = "audit_sink.not_found", "Audit sink not found"


class InvalidAuditSink(InvalidInput):
    code, title = "audit_sink.invalid", "Invalid audit sink"
