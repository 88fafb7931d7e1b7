"""A2A JSON-RPC methods mapped onto AgentBus tasks (04-API-SPEC §12).

- ``SendMessage`` (``message/send``): the message's text parts joined become a task request's
  ``instructions``, its first data part the ``input``, ``metadata.capability`` the capability
  (default: the agent's first), ``metadata.budget`` the budget; the idempotency key is
  ``a2a:<messageId>``, so a message sent again answers the same task. Sent by the workspace's
  bridge (``bridge``), signed there; answers ``{"task": ...}``.
- ``GetTask`` (``tasks/get``): a task the bridge requested, its state mapped; a completed task's
  result (``summary``, ``output``) as an artifact.
- ``CancelTask`` (``tasks/cancel``): the bridge, as requester, sends the cancel.

States: submitted and delivered -> SUBMITTED; accepted and in_progress -> WORKING; completed
-> COMPLETED; failed and expired -> FAILED; rejected -> REJECTED; cancelled -> CANCELED. Our own
state, ``spent``, ``budget`` and ``error_code`` ride in ``metadata.agentbus``.
"""

from __future__ import annotations

import secrets
from typing import Any

from platformkit.db.scope import tenant_transaction
from platformkit.ids import uuid7
from wirekit import canonical_json

from agentbus.a2a.bridge import Bridge, bridge_for
from agentbus.db import SCOPE
from agentbus.errors import AgentBusError, NotFound, RequestInvalid
from agentbus.gateway.actions.payloads import load_payload
from agentbus.gateway.actions.send import send_envelope
from agentbus.gateway.api.auth import require_scopes
from agentbus.gateway.context import Gateway
from agentbus.gateway.domain.wire import format_ts, uuid7_time
from agentbus.gateway.store import agents
from agentbus.gateway.store import messages as message_store
from agentbus.ids import InvalidId, format_id, parse_id
from agentbus.store.integration_tokens import VerifiedToken
from agentbus.tasks import store as task_store
from agentbus.tasks.domain import REQUEST_TYPE
from agentbus.tasks.errors import TaskNotFound
from agentbus.tasks.hooks import TaskService

SCHEMA = "https://agentbus.exchange/schemas/"
CLOUDEVENTS = "application/cloudevents+json"
STATES = {
    "submitted": "TASK_STATE_SUBMITTED", "delivered": "TASK_STATE_SUBMITTED",
    "accepted": "TASK_STATE_WORKING", "in_progress": "TASK_STATE_WORKING",
    "completed": "TASK_STATE_COMPLETED", "failed": "TASK_STATE_FAILED",
    "expired": "TASK_STATE_FAILED", "rejected": "TASK_STATE_REJECTED",
    "cancelled": "TASK_STATE_CANCELED",
}  # fmt: skip
METHODS = {
    "SendMessage": "send", "message/send": "send",
    "GetTask": "get", "tasks/get": "get",
    "CancelTask": "cancel", "tasks/cancel": "cancel",
}  # fmt: skip
Row = dict[str, Any]


class RpcError(Exception):
    """A JSON-RPC error object (A2A's codes: -32001 task not found, -32002 not cancelable,
    -32004 unsupported; JSON-RPC's -32600, -32601, -32602)."""

    def __init__(self, code: int, message: str, data: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.code, self.message, self.data = code, message, data or {}


def _text_of(message: dict[str, Any]) -> tuple[str, dict[str, Any] | None]:
    parts = message.get("parts")
    if not isinstance(parts, list) or not parts:
        raise RpcError(-32602, "message.parts must hold at least one part")
    texts = [p["text"] for p in parts if isinstance(p, dict) and isinstance(p.get("text"), str)]
    datas = [p["data"] for p in parts if isinstance(p, dict) and isinstance(p.get("data"), dict)]
    data = datas[0] if datas else None
    if not texts and data is None:
        raise RpcError(-32602, "message.parts needs a text or a data part")
    return "\n".join(texts) or "(see input)", data


def _metadata(message: dict[str, Any]) -> dict[str, Any]:
    metadata = message.get("metadata")
    return metadata if isinstance(metadata, dict) else {}


def _target_ref(message: dict[str, Any], path_agent: str | None) -> str:
    ref = path_agent or _metadata(message).get("agent")
    if not isinstance(ref, str) or not ref:
        raise RpcError(-32602, "name the agent: message.metadata.agent (an address or agt_ id)")
    return ref


async def _target(gw: Gateway, token: VerifiedToken, ref: str) -> Row:
    async with tenant_transaction(gw.pool, SCOPE, token.tenant_id) as conn:
        if ref.startswith("agent://"):
            agent = await agents.agent_by_address(conn, token.tenant_id, ref)
        else:
            try:
                agent = await agents.get_agent(conn, token.tenant_id, parse_id("agt", ref))
            except InvalidId:
                agent = None
    if agent is None or agent["deleted_at"] is not None or agent["name"] == "a2a-bridge":
        raise RpcError(-32001, f"no agent {ref}")
    if token.workspace_id not in (None, agent["workspace_id"]):
        raise RpcError(-32001, f"no agent {ref}")
    return agent


def _envelope(bridge: Bridge, recipient: str, data: dict[str, Any], **attrs: Any) -> bytes:
    msg_id = uuid7()
    env: dict[str, Any] = {
        "specversion": "1.0", "id": format_id("msg", msg_id), "source": bridge.principal.address,
        "type": REQUEST_TYPE, "time": format_ts(uuid7_time(msg_id)),
        "datacontenttype": "application/json", "dataschema": f"{SCHEMA}{REQUEST_TYPE}.json",
        "recipient": recipient, "conversation": format_id("cnv", uuid7()), "priority": "normal",
        "traceparent": f"00-{secrets.token_hex(16)}-{secrets.token_hex(8)}-01",
        "keyid": format_id("key", bridge.principal.key_id), "data": data,
    }  # fmt: skip
    env.update(attrs)
    if env["type"] == REQUEST_TYPE:
        env["subject"] = "tsk_" + env["id"][4:]
    return canonical_json(bridge.sign(env))


async def send_message(
    gw: Gateway, token: VerifiedToken, params: dict[str, Any], path_agent: str | None
) -> dict[str, Any]:
    message = params.get("message")
    if not isinstance(message, dict):
        raise RpcError(-32602, "params.message must be a Message object")
    if message.get("taskId"):
        raise RpcError(-32004, "follow-up messages to a task are not supported; send a new one")
    message_id = message.get("messageId")
    if not isinstance(message_id, str) or not 1 <= len(message_id) <= 200:
        raise RpcError(-32602, "message.messageId must be a string of 1 to 200 characters")
    text, data_part = _text_of(message)
    agent = await _target(gw, token, _target_ref(message, path_agent))
    metadata = _metadata(message)
    offered = [c["name"] for c in agent["capabilities"]]
    capability = metadata.get("capability") or (offered[0] if offered else None)
    if not isinstance(capability, str):
        raise RpcError(-32602, f"{agent['address']} offers no capability to ask for")
    data: dict[str, Any] = {"instructions": text, "title": text.splitlines()[0][:200] or "A2A"}
    if data_part is not None:
        data["input"] = data_part
    if metadata.get("budget") is not None:
        data["budget"] = metadata["budget"]
    bridge = await bridge_for(gw, token, agent["workspace_id"])
    raw = _envelope(bridge, agent["address"], data, capability=capability,
                    idempotencykey=f"a2a:{message_id}")  # fmt: skip
    rules = TaskService(gw)
    result = await send_envelope(
        gw, bridge.principal, raw, CLOUDEVENTS, task_rules=rules, expected_type=REQUEST_TYPE
    )
    task_ref = result.body.get("task", {}).get("id")
    if not isinstance(task_ref, str):
        raise RpcError(-32603, "the task was not created")
    return {"task": await get_task(gw, token, {"id": task_ref})}


async def _bridge_task(gw: Gateway, token: VerifiedToken, params: dict[str, Any]) -> Row:
    ref = params.get("id")
    try:
        task_id = parse_id("tsk", ref if isinstance(ref, str) else "")
    except InvalidId:
        raise RpcError(-32001, f"no task {ref!r}") from None
    async with tenant_transaction(gw.pool, SCOPE, token.tenant_id) as conn:
        task = await task_store.get_task(conn, token.tenant_id, task_id)
        cur = await conn.execute(
            "SELECT 1 FROM a2a_bridges WHERE tenant_id = %s AND agent_id = %s",
            (token.tenant_id, None if task is None else task["requester_agent_id"]),
        )
        bridged = await cur.fetchone() is not None
    if task is None or not bridged or token.workspace_id not in (None, task["workspace_id"]):
        raise RpcError(-32001, f"no task {ref}")
    return task


async def _artifacts(gw: Gateway, task: Row) -> list[dict[str, Any]]:
    if task["result_msg_id"] is None:
        return []
    async with tenant_transaction(gw.pool, SCOPE, task["tenant_id"]) as conn:
        row = await message_store.find_message(conn, task["tenant_id"], task["result_msg_id"])
    if row is None:
        return []
    data = await load_payload(gw, row)
    parts: list[dict[str, Any]] = [{"text": str(data.get("summary", ""))}]
    if isinstance(data.get("output"), dict):
        parts.append({"data": data["output"]})
    return [{"artifactId": format_id("msg", row["id"]), "name": "result", "parts": parts}]


async def get_task(gw: Gateway, token: VerifiedToken, params: dict[str, Any]) -> dict[str, Any]:
    task = await _bridge_task(gw, token, params)
    moments = [task[c] for c in ("finished_at", "started_at", "accepted_at", "delivered_at")]
    at = next((m for m in moments if m is not None), task["submitted_at"])
    ours = {"state": task["state"], "spent": f"{task['spent']:.6f}", "budget": task["budget"],
            "error_code": task["error_code"], "capability": task["capability"]}  # fmt: skip
    return {
        "id": format_id("tsk", task["id"]),
        "contextId": format_id("cnv", task["conversation_id"]),
        "status": {"state": STATES[task["state"]], "timestamp": format_ts(at)},
        "artifacts": await _artifacts(gw, task),
        "metadata": {"agentbus": ours},
    }


async def cancel_task(gw: Gateway, token: VerifiedToken, params: dict[str, Any]) -> dict[str, Any]:
    task = await _bridge_task(gw, token, params)
    bridge = await bridge_for(gw, token, task["workspace_id"])
    async with tenant_transaction(gw.pool, SCOPE, token.tenant_id) as conn:
        recipient = await agents.get_agent(conn, token.tenant_id, task["recipient_agent_id"])
    assert recipient is not None
    kind = "agentbus.task.cancel.v1"
    raw = _envelope(
        bridge, recipient["address"], {"reason": "cancelled by an A2A client"}, type=kind,
        dataschema=f"{SCHEMA}{kind}.json", subject=format_id("tsk", task["id"]),
        correlation=format_id("msg", task["request_msg_id"]),
        conversation=format_id("cnv", task["conversation_id"]),
    )  # fmt: skip
    try:
        await send_envelope(gw, bridge.principal, raw, CLOUDEVENTS, task_rules=TaskService(gw),
                            expected_type=kind)  # fmt: skip
    except AgentBusError as exc:
        if exc.code in ("AB-6003", "AB-6004"):
            raise RpcError(-32002, f"the task is {task['state']}: it cannot be cancelled") from exc
        raise
    return await get_task(gw, token, params)


def rpc_error_of(exc: AgentBusError) -> RpcError:
    """An AgentBus refusal inside a method, as a JSON-RPC error naming its AB code."""
    data = {"code": exc.code, "name": exc.name, "detail": exc.detail}
    if isinstance(exc, TaskNotFound | NotFound):
        return RpcError(-32001, exc.detail or exc.title, data)
    if isinstance(exc, RequestInvalid) or 400 <= exc.status < 500:
        return RpcError(-32602, exc.detail or exc.title, data)
    return RpcError(-32603, exc.title, {"code": exc.code, "name": exc.name})


async def dispatch(
    gw: Gateway, token: VerifiedToken, method: str, params: dict[str, Any], agent: str | None
) -> dict[str, Any]:
    """One method's result; an RpcError, or the caller's refusal as an AB problem (a token
    without ``send`` for SendMessage and CancelTask: AB-1007)."""
    verb = METHODS.get(method)
    if verb is None:
        raise RpcError(-32601, f"no method {method!r}: SendMessage, GetTask and CancelTask")
    if verb != "get":
        require_scopes(token, ("send",), method)
    try:
        if verb == "send":
            return await send_message(gw, token, params, agent)
        if verb == "get":
            return await get_task(gw, token, params)
        return await cancel_task(gw, token, params)
    except AgentBusError as exc:
        raise rpc_error_of(exc) from exc
