"""The gateway's own Prometheus metrics, served by ``/metrics`` beside the kernel's HTTP ones
(the process's default registry; with several workers the kernel's multiprocess mode adds them
up).

No label names a tenant, an agent or a message: every label value comes from a set the protocol
bounds (the AB codes, the statuses), so the number of series stays small whatever clients send.

- ``agentbus_sends_total{outcome}``: envelopes the send routes answered: ``accepted``,
  ``replayed`` (a repeat of an accepted id), or the AB code that refused it.
- ``agentbus_publish_unconfirmed_total``: accepted messages JetStream did not confirm at once;
  the reconciler publishes them.
- ``agentbus_send_rounds_undone_total``: transactions shared by the sends of several requests
  that one request's failure undid (a dependency down, a policy set that cannot be evaluated);
  their requests then ran one by one. A steady rise means a failing dependency, not load.
- ``agentbus_deliveries_total``: copies handed out to sidecars, redeliveries included.
- ``agentbus_message_status_total{status}``: committed status changes after delivery
  (``delivered``, ``read``, ``expired``, ``dead_lettered``, ``discarded``), counted where their
  notifications are published, after the commit.
- ``agentbus_payload_opens_total{source}``: payloads decrypted for delivery or reading, by where
  their sealed bytes came from: ``inline`` (the JetStream copy, ``inline_payloads``) or
  ``store`` (the object store).
"""

from __future__ import annotations

from prometheus_client import Counter

from agentbus.errors import AgentBusError
from agentbus.gateway.actions.hooks import SendResult

__all__ = [
    "DELIVERIES",
    "MESSAGE_STATUS",
    "PAYLOAD_OPENS",
    "PUBLISH_UNCONFIRMED",
    "SENDS",
    "SEND_ROUNDS_UNDONE",
    "count_send",
]

SENDS = Counter(
    "agentbus_sends",
    "Envelopes answered by the send routes: accepted, replayed, or the AB code that refused it",
    ("outcome",),
)
PUBLISH_UNCONFIRMED = Counter(
    "agentbus_publish_unconfirmed",
    "Accepted messages JetStream did not confirm at once (left to the reconciler)",
)
SEND_ROUNDS_UNDONE = Counter(
    "agentbus_send_rounds_undone",
    "Shared send transactions undone by one request's failure, their requests then run alone",
)
DELIVERIES = Counter("agentbus_deliveries", "Copies handed out to sidecars, redeliveries included")
MESSAGE_STATUS = Counter(
    "agentbus_message_status",
    "Committed status changes after delivery: delivered, read, expired, dead_lettered, discarded",
    ("status",),
)
PAYLOAD_OPENS = Counter(
    "agentbus_payload_opens",
    "Payloads decrypted, by where their sealed bytes came from: inline or store",
    ("source",),
)


def count_send(answer: SendResult | AgentBusError, envelopes: int = 1) -> None:
    """The answer to ``envelopes`` envelopes: an ``AgentBusError`` (its code) or a
    ``SendResult``."""
    if isinstance(answer, AgentBusError):
        outcome = answer.code
    else:
        outcome = "replayed" if answer.replayed else "accepted"
    SENDS.labels(outcome).inc(envelopes)
