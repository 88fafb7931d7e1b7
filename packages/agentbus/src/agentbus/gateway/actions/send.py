"""The send action: ``POST /v1/messages``, its batch ``POST /v1/messages/batch`` and the typed
task routes (04-API-SPEC §4.1, §4.7).

Checks run in the order of §4.1 (signature and key, replay, type and data, expiry, recipient and
``replyto``, conversation, task rules, policy, send limits), so nothing is written for a refused
envelope. Then, in the same transaction, the payload is sealed and stored and the conversation (if
new), the ``messages`` row and the task rows are inserted; only after the commit the message is
published (``Nats-Msg-Id`` = its id), and the sequence and a signed receipt are recorded by one
more statement (``record_receipts``, its own transaction). A repeat of an accepted id takes the
replay path (``replay.replay_send``).

A single send is a batch of one. A batch runs its envelopes in order in one transaction: each is
checked and answered on its own, a refused one stores nothing, and once an envelope of a lane
(recipient, conversation) is refused, the later ones of that lane are answered AB-2021 without
being tried, so a lane never gets ahead of a message its sender must send again (05 §9.1 G2).
What fails the request itself (a dependency down: AB-9xxx and other 5xx) fails every envelope,
and nothing of the batch is stored.

The requests of a tenant's agents that come while its previous one is being written share the
next transaction (``_round``, a group commit): one claim of their ids, one insert of their rows,
one commit, each request still checked and answered as alone. A thousand agents each sending a
message now and then no longer pay a transaction each.

The transaction runs in pipeline mode (``db.pipelined_transaction``), so BEGIN, the tenant
scope and statements whose results are not needed yet share round trips; the sender's key, the
tenant and the recipient come from ``gw.directory`` (one-second copies), asked for as the round
starts, before its transaction opens, so the misses of its sends are read together.
"""

from __future__ import annotations

import contextlib
import functools
import uuid
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from platformkit.db.scope import Conn, tenant_transaction

from agentbus.db import SCOPE, pipelined_transaction
from agentbus.errors import AgentBusError
from agentbus.gateway.actions.accept import Task, finish_sends, insert_rows, insert_send
from agentbus.gateway.actions.addressing import Sender, check_reply_to, resolve_recipient
from agentbus.gateway.actions.blobs import check_attachments
from agentbus.gateway.actions.conversations import admit
from agentbus.gateway.actions.hooks import PendingSend, SendResult, TaskRules
from agentbus.gateway.actions.payloads import load_payload
from agentbus.gateway.actions.policy import PolicyError
from agentbus.gateway.actions.policy import count as count_decision
from agentbus.gateway.actions.publish import publish_message
from agentbus.gateway.actions.replay import replay_send
from agentbus.gateway.api.principals import AgentPrincipal
from agentbus.gateway.context import Gateway
from agentbus.gateway.domain import errors as e
from agentbus.gateway.domain.agent_spec import key_usable
from agentbus.gateway.domain.envelope import (
    Parsed,
    check_attributes,
    check_object,
    check_size,
    parse_body,
    verify_signature,
)
from agentbus.gateway.domain.schemas import MESSAGE, check_type_and_data
from agentbus.gateway.metrics import SEND_ROUNDS_UNDONE, count_send
from agentbus.gateway.store import conversations, messages
from agentbus.ids import format_id
from agentbus.policies.domain import Request as PolicyRequest
from agentbus.policies.model import action_of

__all__ = ["load_payload", "publish_message", "send_batch", "send_envelope"]


async def _usable_key(
    conn: Conn, gw: Gateway, env: Parsed, principal: AgentPrincipal, now: datetime
) -> bytes:
    key = await gw.directory.key(conn, principal.tenant_id, env.key_id)
    if key is None or key["agent_id"] != principal.agent_id or not key_usable(key, now):
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
    conn: Conn,
    gw: Gateway,
    send: PendingSend,
    rules: TaskRules | None,
    now: datetime,
    found: dict[str, Any] | None,
) -> SendResult | None:
    """Steps 5-11 for an envelope whose signature verified and whose id is new: a hook's answer,
    or None to go on. ``found``: its conversation as the batch knows it (None: new, created with
    the message)."""
    env, principal = send.envelope, send.principal
    send.plaintext, send.payload_sha256 = check_type_and_data(env)
    if env.type != MESSAGE and rules is None:
        raise e.TypeUnknown(f"{env.type} is sent through the task routes")
    attached = await check_attachments(conn, principal.tenant_id, env.data)
    send.blobs, send.attachment_bytes = list(attached), sum(attached.values())
    tenant = await gw.directory.tenant(conn, principal.tenant_id)
    assert tenant is not None  # the principal was just checked against it
    send.tenant = tenant
    _check_expiry(env, tenant, now)
    send.recipient = await resolve_recipient(
        conn, gw.directory, tenant["slug"], send.sender, env.get("recipient")
    )
    if "replyto" in env.raw:
        await check_reply_to(conn, tenant["slug"], send.sender, env.get("replyto"))
    send.conversation = None if found is None else admit(found, send.sender, send.recipient)
    if rules is not None:
        answer = await rules.check(conn, send)
        if answer is not None:
            return answer
    await _decide(conn, gw, send, now)
    await gw.limits.check(conn, gw.broker, send)
    return None


async def _claim(
    conn: Conn, tenant_id: uuid.UUID, sends: list[PendingSend]
) -> tuple[dict[uuid.UUID, dict[str, Any]], dict[uuid.UUID, dict[str, Any]], datetime]:
    """Step 4 for every envelope at once, in one round trip: the rows that exist under their
    ids (after locking the ids), their conversations that exist, and the transaction's time."""
    cursor = await conversations.conversations_cursor(
        conn, tenant_id, list({send.envelope.conversation_id for send in sends})
    )
    existing, accepted_at = await messages.claim_ids(
        conn, tenant_id, [send.envelope.msg_id for send in sends]
    )
    known = {row["id"]: row for row in await cursor.fetchall()}
    return existing, known, accepted_at


async def _decide(conn: Conn, gw: Gateway, send: PendingSend, now: datetime) -> None:
    """Step 10: the tenant's Cedar policies on a message, task request or accept (the later
    task messages continue a task they let start)."""
    assert send.recipient is not None
    env = send.envelope
    action = action_of(env.type)
    if action is None:
        return
    try:
        compiled = await gw.policy.policy_set(conn, send.tenant_id, send.sender.workspace_id)
        if compiled.allows_all:
            count_decision(action, True)
            return
        sender = await gw.directory.agent_by_address(conn, send.tenant_id, send.principal.address)
        if sender is None:
            raise PolicyError("the sender's row is gone")
        request = PolicyRequest(
            action=action, principal=sender, resource=send.recipient, type=env.type,
            capability=env.get("capability"), size_bytes=len(send.plaintext),
            attachments=len(send.blobs), attachment_bytes=send.attachment_bytes,
            priority=str(env.get("priority") or "normal"), at=now,
        )  # fmt: skip
        decision = gw.policy.decide(compiled, request)
    except PolicyError as exc:
        raise e.PolicyUnavailable("the policy set cannot be evaluated") from exc
    if not decision.allowed:
        raise e.PolicyDenied(
            decision.reason or "a policy forbids this send",
            policy_id=None if decision.policy_id is None else format_id("pol", decision.policy_id),
            policy=decision.policy_name,
            action=action,
        )


Lane = tuple[str, str]
Answer = SendResult | AgentBusError


def _lane(envelope: Any) -> Lane:
    """(recipient, conversation) as the envelope spells them, also for one that fails its
    checks."""
    if not isinstance(envelope, dict):
        return ("", "")
    return (str(envelope.get("recipient", "")), str(envelope.get("conversation", "")))


def _checked(
    envelope: dict[str, Any],
    principal: AgentPrincipal,
    now: datetime,
    expected_type: str | None = None,
    expected_subject: str | None = None,
) -> Parsed:
    """Steps 1-3 that need no database: the attributes, the route's type and subject, the
    source."""
    env = check_attributes(envelope, now)
    if expected_type is not None and env.type != expected_type:
        raise e.AttributeInvalid(f"this route takes {expected_type}", attribute="type")
    if expected_subject is not None and env.get("subject") != expected_subject:
        raise e.AttributeInvalid("subject must be the task of the path", attribute="subject")
    if env.get("source") != principal.address:
        raise e.SourceMismatch("source is not the authenticated agent's address")
    return env


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
    """Validate, store, publish and sign a receipt for one envelope (``raw`` already capped);
    a refused envelope raises its AB error."""
    now = datetime.now(UTC)
    try:
        envelope = parse_body(raw, content_type)
        env = _checked(envelope, principal, now, expected_type, expected_subject)
        (answer,) = await _send(gw, principal, [(_lane(envelope), env)], now, task_rules)
    except AgentBusError as exc:
        count_send(exc)
        raise
    count_send(answer)
    if isinstance(answer, AgentBusError):
        raise answer
    return answer


async def send_batch(
    gw: Gateway, principal: AgentPrincipal, envelopes: Sequence[tuple[Any, int | AgentBusError]]
) -> list[Answer]:
    """One answer per envelope (with its canonical size, ``parse_batch_body``), in order: a
    ``SendResult`` or the AB error that refused it."""
    now = datetime.now(UTC)
    items: list[tuple[Lane, Parsed | AgentBusError]] = []
    for envelope, size in envelopes:
        try:
            if isinstance(size, AgentBusError):
                raise size
            check_object(envelope)
            check_size(size)
            items.append((_lane(envelope), _checked(envelope, principal, now)))
        except AgentBusError as exc:
            items.append((_lane(envelope), exc))
    try:
        answers = await _send(gw, principal, items, now, None)
    except AgentBusError as exc:  # a dependency down fails every envelope of the batch
        count_send(exc, len(items))
        raise
    for answer in answers:
        count_send(answer)
    return answers


def _refusal(exc: AgentBusError) -> AgentBusError:
    """A refusal of one envelope is answered for it; a failing dependency (5xx) fails the
    request."""
    if exc.status >= 500:
        raise exc
    return exc


@dataclass(eq=False)
class _Batch:
    """One request's envelopes on their way through a transaction, the round's or its own, and
    their answers as they come."""

    principal: AgentPrincipal
    items: list[tuple[Lane, Parsed | AgentBusError]]
    now: datetime
    task_rules: TaskRules | None
    answers: list[Answer | None] = field(init=False)
    refused: dict[Lane, int] = field(init=False, default_factory=dict)
    """lane -> position of its first refused envelope"""
    signed: list[tuple[int, Lane, PendingSend]] = field(init=False, default_factory=list)
    accepted: list[tuple[int, PendingSend, Task]] = field(init=False, default_factory=list)
    replays: list[tuple[int, Parsed, dict[str, Any] | None, TaskRules | None]] = field(
        init=False, default_factory=list
    )
    tokens: int = field(init=False, default=0)
    """send tokens taken (``SendLimits``), given back when the round's transaction is undone"""

    def __post_init__(self) -> None:
        self.answers = [None] * len(self.items)

    def refuse(self, i: int, lane: Lane, exc: AgentBusError) -> None:
        self.answers[i] = _refusal(exc)
        self.refused[lane] = min(i, self.refused.get(lane, i))

    def hold(self, i: int, lane: Lane) -> bool:
        held = self.refused.get(lane, i) < i
        if held:
            self.answers[i] = e.LaneHeld("an earlier envelope of this lane was refused; send again")
        return held


@dataclass
class _Written:
    """What the batches of one transaction add up before its commit."""

    uploads: list[tuple[str, bytes]] = field(default_factory=list)
    rows: list[dict[str, Any]] = field(default_factory=list)  # not inserted yet (insert_rows)
    joined: dict[uuid.UUID, dict[str, Any]] = field(default_factory=dict)  # conversations
    inserted: dict[uuid.UUID, bytes] = field(default_factory=dict)  # id -> signature, new rows


async def _send(
    gw: Gateway,
    principal: AgentPrincipal,
    items: list[tuple[Lane, Parsed | AgentBusError]],
    now: datetime,
    task_rules: TaskRules | None,
) -> list[Answer]:
    rounds = gw.rounds.of("send", functools.partial(_round, gw))
    done = await rounds.ask(principal.tenant_id, _Batch(principal, items, now, task_rules))
    if isinstance(done, Exception):
        raise done
    assert isinstance(done, _Batch), "a round answers every batch"
    if done.accepted:
        finished = await finish_sends(gw, principal, [(s, t) for _, s, t in done.accepted])
        for (i, _, _), result in zip(done.accepted, finished, strict=True):
            done.answers[i] = result
    for i, env, row, rules in done.replays:
        done.answers[i] = await _replay(gw, principal, env, row, rules)
    answers = [a for a in done.answers if a is not None]
    assert len(answers) == len(items), "every envelope is answered"
    return answers


async def _round(
    gw: Gateway, tenant_id: uuid.UUID, batches: list[_Batch]
) -> Mapping[_Batch, _Batch | Exception]:
    """Group commit of sends: the requests of every agent of the tenant that come while the
    tenant's previous round is being written share one transaction: one claim of their ids,
    one insert of their rows, one commit (``agentbus.gathered``). Each request is checked and
    answered as alone. An envelope sent twice in one round is accepted once and answered as a
    replay the second time, as an envelope sent twice in one batch is.

    What would fail a request alone (a dependency down, a policy set that cannot be evaluated,
    a database error) undoes the shared transaction; its requests then run one by one, each in
    its own, so the failure stays the failing request's.

    The keys, tenant and recipients the checks read are read first, those not at hand by one
    statement for the whole round, outside the transaction: a round that waited longer than
    their one-second copies last does not read them one by one inside it.

    Answers: the batch that ran, or the exception that failed it."""
    envs = [env for batch in batches for _, env in batch.items if isinstance(env, Parsed)]
    await gw.directory.prefetch(  # before the transaction opens, as the round starts
        tenant_id,
        [env.key_id for env in envs],
        [to for env in envs if isinstance(to := env.get("recipient"), str)],
    )
    fresh = {batch: batch for batch in batches}
    if len(batches) > 1:
        try:
            await _write(gw, tenant_id, batches)
            return fresh
        except Exception:
            SEND_ROUNDS_UNDONE.inc()
            for batch in batches:
                gw.limits.give_back(tenant_id, batch.principal.agent_id, batch.tokens)
            fresh = {batch: replace(batch) for batch in batches}  # answers start afresh
    done: dict[_Batch, _Batch | Exception] = {}
    for asked, batch in fresh.items():
        try:
            await _write(gw, tenant_id, [batch])
            done[asked] = batch
        except Exception as exc:
            done[asked] = exc
    return done


async def _write(gw: Gateway, tenant_id: uuid.UUID, batches: list[_Batch]) -> None:
    """Steps 1-12 of every batch in one transaction, which stores every accepted envelope; a
    refused envelope is answered in its batch, anything else raised undoes the transaction."""
    written = _Written()
    async with pipelined_transaction(gw.pool, tenant_id) as conn:
        for batch in batches:
            await _verify(conn, gw, batch)
        signed = [send for batch in batches for _, _, send in batch.signed]
        if not signed:
            return
        existing, known, accepted_at = await _claim(conn, tenant_id, signed)
        for batch in batches:
            await _check(conn, gw, batch, existing, known, accepted_at, written)
        await insert_rows(conn, tenant_id, written.rows)
        if written.uploads:  # every payload is stored before its row commits
            await gw.objects.put_many(written.uploads)


async def _verify(conn: Conn, gw: Gateway, batch: _Batch) -> None:
    """Steps 1-3: the signature, with a usable key of the sender."""
    sender = Sender(
        batch.principal.tenant_id,
        batch.principal.agent_id,
        batch.principal.workspace_id,
        batch.principal.owner_user_id,
    )
    for i, (lane, env) in enumerate(batch.items):
        if batch.hold(i, lane):
            continue
        if isinstance(env, AgentBusError):
            batch.refuse(i, lane, env)
            continue
        try:
            verify_signature(env, await _usable_key(conn, gw, env, batch.principal, batch.now))
        except AgentBusError as exc:
            batch.refuse(i, lane, exc)
            continue
        batch.signed.append((i, lane, PendingSend(batch.principal, env, {}, sender)))


async def _check(
    conn: Conn,
    gw: Gateway,
    batch: _Batch,
    existing: dict[uuid.UUID, dict[str, Any]],
    known: dict[uuid.UUID, dict[str, Any]],
    accepted_at: datetime,
    written: _Written,
) -> None:
    """Steps 4-12 of the batch's signed envelopes, in order: a replay, or checked and added to
    ``written``. The conversations the transaction's earlier envelopes joined are seen as they
    left them, as if those had committed first."""
    tenant_id = batch.principal.tenant_id
    for i, lane, send in batch.signed:
        env = send.envelope
        rules = None if env.type == MESSAGE else (batch.task_rules or gw.task_rules)
        row = existing.get(env.msg_id)
        signature = bytes(row["sig"]) if row is not None else written.inserted.get(env.msg_id)
        if batch.hold(i, lane):
            continue
        if signature is not None and signature != env.signature:
            conflict = e.MessageIdConflict(f"{env.raw['id']} exists with another envelope")
            batch.refuse(i, lane, conflict)
            continue
        if signature is not None:  # a replay, of an earlier request or of this batch
            batch.replays.append((i, env, row, rules))
            continue
        send.accepted_at = accepted_at
        found = written.joined.get(env.conversation_id) or known.get(env.conversation_id)
        if rules is not None:  # task rules read the rows of earlier requests
            await insert_rows(conn, tenant_id, written.rows)
        try:
            async with _undo_on_refusal(conn, rules):
                outcome = await _validate(conn, gw, send, rules, batch.now, found)
                if outcome is None:
                    batch.tokens += 1  # the send limits took one (step 11)
                    task = await insert_send(conn, gw, send, rules, written.uploads, written.rows)
        except AgentBusError as exc:
            batch.refuse(i, lane, exc)
            continue
        if outcome is not None:
            batch.answers[i] = outcome
            continue
        batch.accepted.append((i, send, task))
        written.inserted[env.msg_id] = env.signature
        written.joined[env.conversation_id] = _with_sender(send)


async def _replay(
    gw: Gateway,
    principal: AgentPrincipal,
    env: Parsed,
    row: dict[str, Any] | None,
    rules: TaskRules | None,
) -> Answer:
    """A replayed envelope's answer; ``row`` None: its twin earlier in the batch, now
    committed."""
    if row is None:
        async with tenant_transaction(gw.pool, SCOPE, principal.tenant_id) as conn:
            row = await messages.find_message(conn, principal.tenant_id, env.msg_id)
        assert row is not None, "the twin committed with the batch"
    try:
        return await replay_send(gw, principal, env, row, rules)
    except AgentBusError as exc:
        return _refusal(exc)


@contextlib.asynccontextmanager
async def _undo_on_refusal(conn: Conn, rules: TaskRules | None) -> AsyncIterator[None]:
    """Task rules may write before they refuse (``apply``), so a task envelope runs inside a
    savepoint, undone when the envelope is refused; a plain message writes nothing before its
    last check, and needs none. The savepoint is a statement of the pipeline: psycopg's
    ``transaction()`` would not know that the pipeline's own BEGIN opened a transaction (the
    server reports it only at a sync) and would begin and commit one of its own. A database
    error is not caught here: it fails the whole transaction."""
    if rules is None:
        yield
        return
    await conn.execute("SAVEPOINT task_rules")
    try:
        yield
    except AgentBusError:
        await conn.execute("ROLLBACK TO SAVEPOINT task_rules")
        raise
    await conn.execute("RELEASE SAVEPOINT task_rules")


def _with_sender(send: PendingSend) -> dict[str, Any]:
    """The conversation as the rest of the batch sees it: the sender is a participant once its
    message commits (the statistics trigger runs at commit)."""
    conversation = send.conversation
    assert conversation is not None
    participants = list(conversation["participants"] or [])
    if send.principal.agent_id not in participants:
        participants.append(send.principal.agent_id)
    return conversation | {"participants": participants}
