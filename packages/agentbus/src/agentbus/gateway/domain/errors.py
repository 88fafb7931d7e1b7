"""The AB codes the gateway's agent paths raise (00-CONVENTIONS.md §6), beside those that
``agentbus.errors`` already defines: one ``AgentBusError`` subclass per code, rendered once as
problem+json by the HTTP layer. 1xxx credentials and key proofs, 2xxx envelope validation, 3xxx
addressing and registration names, 4xxx policy, 5xxx sizes, 7001 cross-tenant, 8007 cursors,
8009 redrive, 9xxx
dependencies and payload integrity. ``code`` and ``name`` are stable forever.
"""

from __future__ import annotations

from agentbus.errors import AgentBusError


class CredentialInvalid(AgentBusError):
    code, status, name, title = "AB-1005", 401, "credential_invalid", "Agent credential invalid"


class CredentialExpired(AgentBusError):
    code, status, name, title = "AB-1006", 401, "credential_expired", "Agent credential expired"


class KeyProofInvalid(AgentBusError):
    code, status, name, title = "AB-1009", 401, "key_proof_invalid", "Key proof is invalid"


class KeyUnusable(AgentBusError):
    code, status, name, title = "AB-1010", 401, "key_unusable", "Agent key revoked or expired"


class ProofReplayed(AgentBusError):
    code, status, name, title = "AB-1011", 401, "proof_replayed", "Key proof already used"


class ClockSkew(AgentBusError):
    code, status, name, title = "AB-1012", 401, "clock_skew", "Key proof time out of range"


class AgentDisabled(AgentBusError):
    code, status, name, title = "AB-1014", 403, "agent_disabled", "Agent disabled or deleted"


class EnvelopeMalformed(AgentBusError):
    code, status, name, title = "AB-2001", 400, "envelope_malformed", "Envelope is malformed"


class AttributeMissing(AgentBusError):
    code, status, name, title = "AB-2002", 422, "attribute_missing", "Attribute missing"


class AttributeInvalid(AgentBusError):
    code, status, name, title = "AB-2003", 422, "attribute_invalid", "Attribute invalid"


class AttributeUnknown(AgentBusError):
    code, status, name, title = "AB-2004", 422, "attribute_unknown", "Attribute unknown"


class SpecversionUnsupported(AgentBusError):
    code, status, name = "AB-2005", 422, "specversion_unsupported"
    title = "CloudEvents specversion not supported"


class TypeUnknown(AgentBusError):
    code, status, name, title = "AB-2006", 422, "type_unknown", "Event type not registered"


class DataInvalid(AgentBusError):
    code, status, name, title = "AB-2007", 422, "data_invalid", "Data fails the type's schema"


class MessageIdInvalid(AgentBusError):
    code, status, name, title = "AB-2008", 422, "message_id_invalid", "Message id invalid"


class MessageIdInFuture(AgentBusError):
    code, status, name, title = "AB-2009", 422, "message_id_in_future", "Message id in future"


class MessageIdStale(AgentBusError):
    code, status, name, title = "AB-2010", 422, "message_id_stale", "Message id too old"


class SignatureInvalid(AgentBusError):
    code, status, name = "AB-2011", 422, "signature_invalid"
    title = "Envelope signature does not verify"


class SigningKeyUnusable(AgentBusError):
    code, status, name, title = "AB-2012", 422, "signing_key_unusable", "Signing key unusable"


class SourceMismatch(AgentBusError):
    code, status, name, title = "AB-2013", 403, "source_mismatch", "Source is not the caller"


class AlreadyExpired(AgentBusError):
    code, status, name, title = "AB-2014", 422, "already_expired", "Message already expired"


class ExpiryTooFar(AgentBusError):
    code, status, name, title = "AB-2015", 422, "expiry_too_far", "Expiry beyond retention"


class MessageIdConflict(AgentBusError):
    code, status, name = "AB-2016", 409, "message_id_conflict"
    title = "Message id exists with another envelope"


class ContentTypeUnsupported(AgentBusError):
    code, status, name = "AB-2017", 415, "content_type_unsupported"
    title = "Content type not supported"


class NumberOutOfRange(AgentBusError):
    code, status, name, title = "AB-2018", 422, "number_out_of_range", "Integer out of range"


class ConversationConflict(AgentBusError):
    code, status, name = "AB-2019", 409, "conversation_conflict"
    title = "Conversation belongs elsewhere"


class LaneHeld(AgentBusError):
    code, status, name = "AB-2021", 409, "lane_held"
    title = "An earlier message of this lane failed in the same batch"


class AddressInvalid(AgentBusError):
    code, status, name, title = "AB-3001", 422, "address_invalid", "Address invalid"


class RecipientNotFound(AgentBusError):
    code, status, name, title = "AB-3002", 404, "recipient_not_found", "Recipient not found"


class RecipientDisabled(AgentBusError):
    code, status, name, title = "AB-3003", 409, "recipient_disabled", "Recipient is disabled"


class SchemeNotSupported(AgentBusError):
    code, status, name, title = "AB-3004", 422, "scheme_not_supported", "Scheme not supported"


class NotAParticipant(AgentBusError):
    code, status, name = "AB-3005", 403, "not_a_participant"
    title = "Sender is not a participant of the conversation"


class AgentNameTaken(AgentBusError):
    code, status, name, title = "AB-3006", 409, "agent_name_taken", "Agent name taken"


class NameReserved(AgentBusError):
    code, status, name, title = "AB-3007", 422, "name_reserved", "Agent name reserved"


class ReplyToInvalid(AgentBusError):
    code, status, name, title = "AB-3008", 422, "reply_to_invalid", "replyto invalid"


class PolicyDenied(AgentBusError):
    code, status, name, title = "AB-4001", 403, "policy_denied", "Denied by policy"


class PolicyUnavailable(AgentBusError):
    code, status, name, title = "AB-4002", 503, "policy_unavailable", "Policy unavailable"


class PayloadTooLarge(AgentBusError):
    code, status, name, title = "AB-5001", 413, "payload_too_large", "Payload too large"


class RequestTooLarge(AgentBusError):
    code, status, name, title = "AB-5002", 413, "request_too_large", "Request too large"


class RateLimited(AgentBusError):
    code, status, name, title = "AB-5003", 429, "rate_limited", "Sending too fast"


class RecipientBacklogFull(AgentBusError):
    code, status, name, title = "AB-5004", 429, "recipient_backlog_full", "Recipient backlog full"


class StreamFull(AgentBusError):
    code, status, name, title = "AB-5005", 507, "stream_full", "Tenant stream full"


class ApiRateLimited(AgentBusError):
    code, status, name, title = "AB-5008", 429, "api_rate_limited", "Too many requests"


class BatchTooLarge(AgentBusError):
    code, status, name = "AB-5009", 413, "batch_too_large"
    title = "Too many items in a batch"


class CrossTenantNotEnabled(AgentBusError):
    code, status, name = "AB-7001", 403, "cross_tenant_not_enabled"
    title = "Cross-tenant messaging is not enabled"


class BrokerUnavailable(AgentBusError):
    code, status, name, title = "AB-9003", 503, "broker_unavailable", "Broker unavailable"


class ObjectStoreUnavailable(AgentBusError):
    code, status, name = "AB-9004", 503, "object_store_unavailable"
    title = "Object store unavailable"


class KeyUnavailable(AgentBusError):
    code, status, name, title = "AB-9020", 503, "key_unavailable", "Tenant key unavailable"


class PayloadIntegrityFailed(AgentBusError):
    code, status, name = "AB-9021", 500, "payload_integrity_failed"
    title = "Payload does not match its digest"


class CursorInvalid(AgentBusError):
    code, status, name, title = "AB-8007", 400, "cursor_invalid", "Cursor invalid"


class NotRedrivable(AgentBusError):
    code, status, name, title = "AB-8009", 409, "not_redrivable", "Message cannot be redriven"


class BlobReferenceInvalid(AgentBusError):
    code, status, name = "AB-2020", 422, "blob_reference_invalid"
    title = "Attachment names an unknown or expired blob"


class BlobTooLarge(AgentBusError):
    code, status, name, title = "AB-5007", 413, "blob_too_large", "Blob too large"
