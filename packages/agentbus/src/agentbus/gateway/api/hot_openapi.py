"""The agents' hot routes in the OpenAPI document. They are plain Starlette routes put ahead of
the included FastAPI routers (sends and batches, the inbox and its settlements, the delivery
WebSocket, tasks, blobs, heartbeats), so FastAPI cannot see them; their path items are built
here, from the same pydantic models and JSON Schemas the routes check bodies against, and merged
into the document the app generates. docs/agentbus/04-API-SPEC.md is the contract in prose.
"""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

from platformkit.http.openapi import Problem
from pydantic import BaseModel

from agentbus.delivery import bodies as delivery_bodies
from agentbus.delivery.domain import MAX_BATCH, MAX_BYTES, MAX_WAIT_S
from agentbus.gateway.actions.presence import Heartbeat
from agentbus.gateway.api.bodies import MANAGEMENT_BODY_MAX
from agentbus.gateway.domain.envelope import BATCH_BODY_MAX, SEND_BODY_MAX
from agentbus.tasks.domain import VERB_EVENTS
from agentbus.usage.actions import BATCH_MAX as USAGE_BATCH_MAX
from agentbus.usage.api import BODY_MAX as USAGE_BODY_MAX
from agentbus.usage.records import Record as UsageRecord

_REF = "#/components/schemas/"
_AGENT: list[dict[str, list[str]]] = [{"agentToken": []}]
_READER: list[dict[str, list[str]]] = [{"agentToken": []}, {"operatorToken": []}]
_OBJECT = {"type": "object", "additionalProperties": True}
_PROBLEM = {"application/problem+json": {"schema": {"$ref": _REF + "Problem"}}}


def _envelope_schema() -> dict[str, Any]:
    """The message envelope's JSON Schema (schemas/agentbus.message.v1.json), as the gateway
    validates it, under OpenAPI 3.1 (JSON Schema 2020-12, its $id and $schema dropped)."""
    text = resources.files("agentbus.gateway.domain").joinpath("schemas/agentbus.message.v1.json")
    schema: dict[str, Any] = json.loads(text.read_text())
    for key in ("$id", "$schema"):
        schema.pop(key, None)
    return schema


def _ok(description: str, schema: dict[str, Any] | None = None) -> dict[str, Any]:
    content = {"application/json": {"schema": schema or _OBJECT}}
    return {"description": description, "content": content}


def _problems(*statuses: int) -> dict[str, Any]:
    """The statuses a route names, and any other 4xx or 5xx, as problems (as FastAPI's routes
    document them app-wide)."""
    return {
        str(s): {"description": "Problem (AB- code)", "content": _PROBLEM}
        for s in (*statuses, 401, 403, 429, "4XX", "5XX")
    }


def _json_body(
    schema: dict[str, Any], limit: int, media: tuple[str, ...] = ("application/json",)
) -> dict[str, Any]:
    return {
        "required": True,
        "description": f"At most {limit} bytes.",
        "content": {m: {"schema": schema} for m in media},
    }


# A single envelope is sent in CloudEvents' structured mode, or as plain JSON.
ENVELOPE_MEDIA = ("application/cloudevents+json", "application/json")


def _op(
    summary: str,
    operation_id: str,
    responses: dict[str, Any],
    *,
    security: list[dict[str, list[str]]] = _AGENT,
    body: dict[str, Any] | None = None,
    parameters: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    operation: dict[str, Any] = {
        "tags": ["agents"],
        "summary": summary,
        "operationId": operation_id,
        "security": security,
        "responses": responses,
    }
    if body is not None:
        operation["requestBody"] = body
    if parameters:
        operation["parameters"] = parameters
    return operation


def _path(name: str, description: str) -> dict[str, Any]:
    return {
        "name": name,
        "in": "path",
        "required": True,
        "description": description,
        "schema": {"type": "string"},
    }


def _query(name: str, schema: dict[str, Any], description: str) -> dict[str, Any]:
    return {
        "name": name,
        "in": "query",
        "required": False,
        "description": description,
        "schema": schema,
    }


def _model(model: type[BaseModel], schemas: dict[str, Any]) -> dict[str, Any]:
    found = model.model_json_schema(ref_template=_REF + "{model}")
    for name, sub in found.pop("$defs", {}).items():
        schemas.setdefault(name, sub)
    schemas[model.__name__] = found
    return {"$ref": _REF + model.__name__}


def hot_paths(components: dict[str, Any]) -> dict[str, Any]:
    """The path items of the hot routes; adds their schemas to ``components``."""
    schemas = components.setdefault("schemas", {})
    schemas["Envelope"] = _envelope_schema()
    schemes = components.setdefault("securitySchemes", {})
    schemes["agentToken"] = {"type": "http", "scheme": "bearer", "description": "abk_ token"}
    schemes["operatorToken"] = {"type": "http", "scheme": "bearer", "description": "abo_ token"}
    envelope = {"$ref": _REF + "Envelope"}
    accepted = {
        "type": "object",
        "required": ["receipt", "message"],
        "properties": {
            "receipt": _OBJECT,
            "message": {
                "type": "object",
                "required": ["id", "status", "conversation", "accepted_at"],
                "properties": {
                    "id": {"type": "string"},
                    "status": {"type": "string"},
                    "conversation": {"type": "string"},
                    "accepted_at": {"type": "string"},
                },
            },
            "task": _OBJECT,
        },
    }
    results = {
        "type": "object",
        "required": ["results"],
        "properties": {"results": {"type": "array", "items": _OBJECT}},
    }
    sent = {
        "202": _ok("Accepted: the signed receipt, the message (and the task's state).", accepted),
        "200": _ok("The same envelope again: the first answer, replayed.", accepted),
        **_problems(400, 404, 409, 413, 422),
    }
    settle = {"200": _ok("One result per item, in order.", results), **_problems(413, 422)}
    inbox = {
        "type": "object",
        "properties": {
            "deliveries": {"type": "array", "items": _OBJECT},
            "pending_estimate": {"type": "integer"},
            "replaced": {"type": "boolean"},
            "draining": {"type": "boolean"},
        },
    }
    page = {
        "type": "object",
        "required": ["items"],
        "properties": {
            "items": {"type": "array", "items": _OBJECT},
            "next_cursor": {"type": ["string", "null"]},
        },
    }
    msg, task = _path("msg_id", "msg_... id"), _path("task_id", "tsk_... id")
    verb = _path("verb", "One of: " + ", ".join(sorted(VERB_EVENTS)))
    verb["schema"] = {"type": "string", "enum": sorted(VERB_EVENTS)}
    paths: dict[str, Any] = {
        "/v1/messages": {
            "post": _op(
                "Send a message",
                "send_message",
                sent,
                body=_json_body(envelope, SEND_BODY_MAX, ENVELOPE_MEDIA),
            )
        },
        "/v1/messages/batch": {
            "post": _op(
                "Send up to 100 messages, each accepted or refused alone",
                "send_batch",
                {"200": _ok("One result per envelope, in order.", results), **_problems(413, 422)},
                body=_json_body(
                    {
                        "type": "object",
                        "required": ["envelopes"],
                        "properties": {"envelopes": {"type": "array", "items": envelope}},
                    },
                    BATCH_BODY_MAX,
                ),
            )
        },
        "/v1/messages/{msg_id}": {
            "get": _op(
                "A message, for its parties and the tenant's operators",
                "get_message",
                {"200": _ok("The message"), **_problems(404, 422)},
                security=_READER,
                parameters=[
                    msg,
                    _query(
                        "include",
                        {"type": "string", "enum": ["envelope"]},
                        "envelope: the signed envelope too",
                    ),
                ],
            )
        },
        "/v1/messages/{msg_id}/redrive": {
            "post": _op(
                "Deliver a dead-lettered message again",
                "redrive_message",
                {"202": _ok("Redriven"), **_problems(404, 409, 422)},
                security=_READER,
                parameters=[msg],
            )
        },
        "/v1/inbox": {
            "get": _op(
                "Long-poll for deliveries",
                "poll_inbox",
                {
                    "200": _ok("Deliveries (maybe none), with what else waits.", inbox),
                    "204": {"description": "The client left before the answer."},
                    **_problems(422),
                },
                parameters=[
                    _query(
                        "wait_s",
                        {"type": "integer", "minimum": 0, "maximum": MAX_WAIT_S},
                        "seconds to hold the poll",
                    ),
                    _query(
                        "max",
                        {"type": "integer", "minimum": 1, "maximum": MAX_BATCH},
                        "at most this many deliveries",
                    ),
                    _query(
                        "max_bytes",
                        {"type": "integer", "minimum": 1, "maximum": MAX_BYTES},
                        "at most this many bytes",
                    ),
                ],
            )
        },
        "/v1/inbox/ws": {
            "get": _op(
                "The delivery WebSocket",
                "inbox_websocket",
                {
                    "101": {
                        "description": "Switching Protocols: deliveries pushed as frames, "
                        "settlements and batches of envelopes (send frames) sent back; a bad "
                        "frame is answered AB-8001."
                    }
                },
            )
        },
    }
    for name, model in (
        ("ack", delivery_bodies.Acks),
        ("nak", delivery_bodies.Naks),
        ("term", delivery_bodies.Terms),
        ("read", delivery_bodies.Reads),
    ):
        paths[f"/v1/inbox/{name}"] = {
            "post": _op(
                f"Settle deliveries: {name}",
                f"inbox_{name}",
                settle,
                body=_json_body(_model(model, schemas), delivery_bodies.BODY_MAX),
            )
        }
    paths["/v1/tasks"] = {
        "post": _op(
            "Request a task (an agentbus.task.request.v1 envelope)",
            "request_task",
            sent,
            body=_json_body(envelope, SEND_BODY_MAX, ENVELOPE_MEDIA),
        ),
        "get": _op(
            "Tasks the caller is a party to",
            "list_tasks",
            {"200": _ok("A page of tasks", page), **_problems(422)},
            parameters=[
                _query("role", {"type": "string"}, "requester or assignee"),
                _query("state", {"type": "string"}, "a task state"),
                _query("capability", {"type": "string"}, "the requested capability"),
                _query("limit", {"type": "integer", "minimum": 1}, "page size"),
                _query("cursor", {"type": "string"}, "next_cursor of the previous page"),
            ],
        ),
    }
    paths["/v1/tasks/{task_id}"] = {
        "get": _op(
            "A task", "get_task", {"200": _ok("The task"), **_problems(404, 422)}, parameters=[task]
        )
    }
    paths["/v1/tasks/{task_id}/transitions"] = {
        "get": _op(
            "A task's transitions, oldest first",
            "get_task_transitions",
            {"200": _ok("Transitions", {"type": "array", "items": _OBJECT}), **_problems(404, 422)},
            parameters=[task],
        )
    }
    paths["/v1/tasks/{task_id}/{verb}"] = {
        "post": _op(
            "A task event (its agentbus.task.<verb>.v1 envelope, subject the task)",
            "task_event",
            sent,
            body=_json_body(envelope, SEND_BODY_MAX, ENVELOPE_MEDIA),
            parameters=[task, verb],
        )
    }
    paths["/v1/blobs"] = {
        "post": _op(
            "Upload a blob (the raw bytes, with their Content-Type)",
            "upload_blob",
            {"201": _ok("The stored blob"), **_problems(413, 422)},
            body={
                "required": True,
                "content": {"*/*": {"schema": {"type": "string", "format": "binary"}}},
            },
        )
    }
    paths["/v1/blobs/{blob_id}"] = {
        "get": _op(
            "A blob's bytes, as uploaded",
            "get_blob",
            {
                "200": {
                    "description": "The bytes, with the type they were uploaded with.",
                    "content": {"*/*": {"schema": {"type": "string", "format": "binary"}}},
                },
                **_problems(404, 422),
            },
            security=_READER,
            parameters=[
                _path("blob_id", "blb_... id"),
                _query("message", {"type": "string"}, "the message that references it"),
            ],
        )
    }
    paths["/v1/agents/{agent_id}/heartbeat"] = {
        "post": _op(
            "The agent's presence",
            "agent_heartbeat",
            {"204": {"description": "Recorded"}, **_problems(404, 422)},
            body=_json_body(_model(Heartbeat, schemas), MANAGEMENT_BODY_MAX),
            parameters=[_path("agent_id", "agt_... id, the caller's own")],
        )
    }
    paths.update(_usage_and_a2a(schemas))
    schemas.setdefault("Problem", Problem.model_json_schema())
    return paths


def _usage_and_a2a(schemas: dict[str, Any]) -> dict[str, Any]:
    """Usage uploads (04 §9) and the A2A surface (04 §12)."""
    uploaded = {
        "type": "object",
        "required": ["accepted", "duplicates", "refused"],
        "properties": {
            "accepted": {"type": "integer"},
            "duplicates": {"type": "integer"},
            "refused": {"type": "array", "items": _OBJECT},
        },
    }
    records = {
        "type": "object",
        "required": ["records"],
        "additionalProperties": False,
        "properties": {
            "records": {
                "type": "array",
                "minItems": 1,
                "maxItems": USAGE_BATCH_MAX,
                "items": _model(UsageRecord, schemas),
            }
        },
    }
    rpc = _json_body(
        {
            "type": "object",
            "required": ["jsonrpc", "method"],
            "properties": {
                "jsonrpc": {"const": "2.0"},
                "id": {"type": ["string", "integer", "null"]},
                "method": {"type": "string"},
                "params": _OBJECT,
            },
        },
        MANAGEMENT_BODY_MAX,
    )
    rpc_answer = {"200": _ok("A JSON-RPC result or error"), **_problems(413, 422)}
    return {
        "/v1/usage": {
            "post": _op(
                "Upload usage records (model calls and their tokens), idempotent by id",
                "upload_usage",
                {
                    "202": _ok("Stored, repeated and refused records", uploaded),
                    **_problems(413, 422),
                },
                body=_json_body(records, USAGE_BODY_MAX),
            )
        },
        "/.well-known/agent-card.json": {
            "get": _op(
                "The A2A agent card of the caller's tenant: its agents as skills",
                "a2a_agent_card",
                {"200": _ok("An A2A agent card"), **_problems()},
                security=_READER,
            )
        },
        "/a2a/v1": {
            "post": _op(
                "A2A JSON-RPC (SendMessage, GetTask, CancelTask) for the tenant",
                "a2a_rpc",
                rpc_answer,
                security=[{"operatorToken": []}],
                body=rpc,
            )
        },
        "/a2a/v1/agents/{agent_id}": {
            "post": _op(
                "A2A JSON-RPC addressed to one agent",
                "a2a_agent_rpc",
                rpc_answer,
                security=[{"operatorToken": []}],
                body=rpc,
                parameters=[_path("agent_id", "agt_... id")],
            )
        },
    }
