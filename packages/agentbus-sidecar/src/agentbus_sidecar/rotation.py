"""Replacing the agent's key before it expires (04-API-SPEC.md §2.4).

A key lives 90 days; once ``ROTATE_BEFORE`` (30 days) or less is left, the sidecar loop checks
daily and makes a successor: ``POST /v1/agents/{agt}/keys`` with a proof by the new key, then
signs with the new key from the next envelope on. The old key is not revoked: envelopes already
signed with it and waiting in the outbox still go out, and it expires on its own
(``agentbus keys revoke`` ends it sooner).

The new private key is written to credentials.json (``next_private_key``) before the gateway is
asked, so a crash between the gateway taking it and the switch loses nothing: the next attempt
offers the same key, which the gateway answers again. Only after its answer does the stored key
become the new one (``private_key``, ``key_id``, ``key_expires_at``), in one atomic write.

A key that was revoked (a leak) or has expired cannot prove anything, so no credential can be
had with it (AB-1010). The new key is then offered with the integration token instead (it needs
``register``, and its owner must own the agent or administer its workspace): the agent keeps its
address and its conversations. Sends the gateway refused because the old key was revoked
(AB-2012, parked) were never accepted; they are signed again with the new key and go back in
line.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timedelta

from agentbus_sidecar.clock import parse_ts, server_now, utcnow
from agentbus_sidecar.credentials import save_credentials
from agentbus_sidecar.envelope import sign_envelope
from agentbus_sidecar.errors import GatewayError, SidecarError
from agentbus_sidecar.keys import (
    fingerprint,
    generate_key,
    key_proof,
    load_private_key,
    private_key_pem,
    public_key_b64url,
)
from agentbus_sidecar.runtime import Runtime, record_identity
from agentbus_sidecar.store import outbox

__all__ = ["KEY_UNUSABLE", "ROTATE_BEFORE", "Rotation", "key_expiry", "rotate_key", "rotation_due"]

ROTATE_BEFORE = timedelta(days=30)
KEY_UNUSABLE = "AB-1010"
SIGNING_KEY_UNUSABLE = "AB-2012"


def rotation_due(expires_at: datetime, now: datetime) -> bool:
    """Whether the key should be replaced now: 30 days or less are left of it."""
    return expires_at - now <= ROTATE_BEFORE


@dataclass(frozen=True)
class Rotation:
    old_key_id: str
    key_id: str
    fingerprint: str
    expires_at: str | None
    signed_again: list[str]  # sends refused for the old key (AB-2012), back in the outbox


async def key_expiry(rt: Runtime) -> datetime:
    """When the current key expires: from credentials.json, else asked of the gateway once
    (files written before the expiry was stored) and stored."""
    if rt.creds.key_expires_at is None:
        keys = await rt.session.call(rt.client.list_keys, rt.agent_id)
        mine = next((k for k in keys if k.get("id") == rt.key_id), None)
        if mine is None or not isinstance(mine.get("expires_at"), str):
            raise SidecarError(f"the gateway does not list this agent's key {rt.key_id}")
        rt.creds.key_expires_at = mine["expires_at"]
        save_credentials(rt.creds_path, rt.creds)
    return parse_ts(rt.creds.key_expires_at)


async def rotate_key(rt: Runtime) -> Rotation:
    """Add a successor key at the gateway and sign with it from now on."""
    creds = rt.creds
    if creds.next_private_key is None:
        creds.next_private_key = private_key_pem(generate_key())
        save_credentials(rt.creds_path, creds)
    new = load_private_key(creds.next_private_key)
    public = public_key_b64url(new)
    try:
        proof = key_proof(new, rt.agent_id, server_now())
        answer = await rt.session.call(rt.client.add_key, rt.agent_id, public, proof)
    except GatewayError as exc:
        if exc.code != KEY_UNUSABLE or not creds.integration_token:
            raise
        # The current key can no longer prove anything: the owner's token vouches instead.
        proof = key_proof(new, rt.agent_id, server_now())
        answer = await rt.client.add_key(creds.integration_token, rt.agent_id, public, proof)
    if not isinstance(answer.get("id"), str):
        raise SidecarError("the gateway's answer names no key")
    old_key_id = rt.key_id
    creds.private_key, creds.key_id = creds.next_private_key, answer["id"]
    creds.key_expires_at, creds.next_private_key = answer.get("expires_at"), None
    save_credentials(rt.creds_path, creds)
    rt.key = new
    record_identity(rt.conn, creds, new)
    again = _sign_refused_again(rt, old_key_id)
    return Rotation(old_key_id, answer["id"], fingerprint(new), creds.key_expires_at, again)


def _sign_refused_again(rt: Runtime, old_key_id: str) -> list[str]:
    """Sends parked because the gateway refused the old key (revoked, AB-2012) were never
    accepted: signed again with the new key, they go out in their order, under their ids."""
    again = []
    for row in outbox.rows(rt.conn, kind="send"):
        refused_key = SIGNING_KEY_UNUSABLE in (row["last_error"] or "")
        if row["next_attempt_at"] != outbox.PARKED or not refused_key:
            continue
        envelope = json.loads(bytes(row["body"]))
        if envelope.get("keyid") != old_key_id:
            continue
        unsigned = {k: v for k, v in envelope.items() if k != "signature"}
        signed = sign_envelope({**unsigned, "keyid": rt.key_id}, rt.key)
        outbox.requeue_send(rt.conn, signed, utcnow())
        again.append(str(envelope["id"]))
    return again
