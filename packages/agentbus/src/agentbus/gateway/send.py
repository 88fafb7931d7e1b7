"""The send action, ``POST /v1/messages`` and the typed task routes (04-API-SPEC §4.1).

Checks run in the order of §4.1 at the start of one transaction (signature and key, replay, type
and data, expiry, recipient and ``replyto``, conversation, task rules, policy, send limits), so
nothing is written for a refused envelope. Then, in the same transaction, the payload is sealed
and stored and the conversation (if new), the ``messages`` row and the task rows are inserted;
only after the commit the message is published (``Nats-Msg-Id`` = its id), and the sequence and
a signed receipt are recorded by one more statement (``record_receipt``, its own transaction).
A repeat of an accepted id takes the replay path (``replay.replay_send``).

The transaction runs in pipeline mode (``db.pipelined_transaction``), so BEGIN, the tenant
scope and statements whose results are not needed yet share round trips; the sender's key, the
tenant and the recipient come from ``gw.directory`` (one-second copies).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from platformkit.db.scope import Conn

from agentbus.db import pipelined_transaction
from agentbus.gateway import errors as e
from agentbus.gateway.accept import finish_send, insert_send
from agentbus.gateway.addressing import Sender, check_reply_to, resolve_recipient
from agentbus.gateway.context import Gateway
from agentbus.gateway.conversations import admit
from agentbus.gateway.envelope import Parsed, check_attributes, parse_body, verify_signature
from agentbus.gateway.hooks import PendingSend, SendResult, TaskRules
from agentbus.gateway.payloads import load_payload
from agentbus.gateway.policy import PolicyError, SendRequest
from agentbus.gateway.principals import AgentPrincipal
from agentbus.gateway.publish import publish_message
from agentbus.gateway.replay import replay_send
from agentbus.gateway.schemas import MESSAGE, check_type_and_data
from agentbus.gateway.store import conversations, messages
from agentbus.ids import format_id

__all__ = ["load_payload", "publish_message", "send_envelope"]


async def _usable_key(
    conn: Conn, gw: Gateway, env: Parsed, principal: AgentPrincipal, now: datetime
) -> bytes:
    key = await gw.directory.key(conn, principal.tenant_id, env.key_id)
    if (
        key is None
        or key["agent_id"] != principal.agent_id
        or key["revoked_at"] is not None
        or key["expires_at"] <= now
    ):
        raise e.SigningKeyUnusable(f"{env.raw['keyid']} is not a usable key of the sender")
    return bytes(key["public_key"])


def _check_expiry(env: Parsed, tenant: dict[str, Any], now: datetime) -> None:
    if env.expires_at is None:
        return
    if env.expires_at <= now:
        raise e.AlreadyExpired("expires is not in the future")
    if env.expires_at > now + timedelta(days=tenant["retention_days"]):
        raise e.ExpiryTooFar("expires is beyond the tenant's retention")


async def _validate(
    conn: Conn, gw: Gateway, send: PendingSend, rules: TaskRules | None, now: datetime
) -> SendResult | dict[str, Any] | None:
    """Steps 3-10; the existing row for a replay, a hook's answer, or None to go on."""
    env, principal = send.envelope, send.principal
    verify_signature(env, await _usable_key(conn, gw, env, principal, now))
    # queued now, so the conversation comes back in the claim's round trip
    conversation = await conversations.conversation_cursor(
        conn, principal.tenant_id, env.conversation_id
    )
    existing, send.accepted_at = await messages.claim_id(conn, principal.tenant_id, env.msg_id)
    if existing is not None:
        return existing
    send.plaintext, send.payload_sha256 = check_type_and_data(env)
    if env.type != MESSAGE and rules is None:
        raise e.TypeUnknown(f"{env.type} is sent through the task routes")
    tenant = await gw.directory.tenant(conn, principal.tenant_id)
    assert tenant is not None  # the principal was just checked against it
    send.tenant = tenant
    _check_expiry(env, tenant, now)
    send.recipient = await resolve_recipient(
        conn, gw.directory, tenant["slug"], send.sender, env.get("recipient")
    )
    if "replyto" in env.raw:
        await check_reply_to(conn, tenant["slug"], send.sender, env.get("replyto"))
    found = await conversation.fetchone()  # None: new, created with the message
    send.conversation = None if found is None else admit(found, send.sender, send.recipient)
    if rules is not None:
        answer = await rules.check(conn, send)
        if answer is not None:
            return answer
    await _decide(gw, send)
    await gw.limits.check(conn, gw.broker, send)
    return None


async def _decide(gw: Gateway, send: PendingSend) -> None:
    assert send.recipient is not None
    request = SendRequest(
        tenant_id=send.tenant_id,
        workspace_id=send.sender.workspace_id,
        sender={
            "id": send.principal.agent_id,
            "address": send.principal.address,
            "workspace_id": send.sender.workspace_id,
            "owner_user_id": send.sender.owner_user_id,
        },
        recipient=send.recipient,
        type=send.envelope.type,
        capability=send.envelope.get("capability"),
        conversation_id=send.envelope.conversation_id,
    )
    try:
        decision = await gw.policy.decide(request)
    except PolicyError as exc:
        raise e.PolicyUnavailable("the policy set cannot be evaluated") from exc
    if not decision.allowed:
        pid = None if decision.policy_id is None else format_id("pol", decision.policy_id)
        raise e.PolicyDenied(decision.reason or "a policy forbids this send", policy_id=pid)


async def send_envelope(
    gw: Gateway,
    principal: AgentPrincipal,
    raw: bytes,
    content_type: str | None,
    *,
    task_rules: TaskRules | None = None,
    expected_type: str | None = None,
    expected_subject: str | None = None,
) -> SendResult:
    """Validate, store, publish and sign a receipt for one envelope (``raw`` already capped)."""
    now = datetime.now(UTC)
    env = check_attributes(parse_body(raw, content_type), now)
    if expected_type is not None and env.type != expected_type:
        raise e.AttributeInvalid(f"this route takes {expected_type}", attribute="type")
    if expected_subject is not None and env.get("subject") != expected_subject:
        raise e.AttributeInvalid("subject must be the task of the path", attribute="subject")
    if env.get("source") != principal.address:
        raise e.SourceMismatch("source is not the authenticated agent's address")
    rules = None if env.type == MESSAGE else (task_rules or gw.task_rules)
    sender = Sender(
        principal.tenant_id, principal.agent_id, principal.workspace_id, principal.owner_user_id
    )
    send = PendingSend(principal, env, {}, sender)
    task: dict[str, Any] | None = None
    async with pipelined_transaction(gw.pool, principal.tenant_id) as conn:
        outcome = await _validate(conn, gw, send, rules, now)
        if outcome is None:
            task = await insert_send(conn, gw, send, rules)
    if isinstance(outcome, SendResult):
        return outcome
    if outcome is not None:
        return await replay_send(gw, principal, env, outcome, rules)
    return await finish_send(gw, send, task)
