"""The agent channel in the OpenAPI document. Its routes are plain Starlette routes (the
WebSocket and the HTTP fallback, agent_ws.py and agent_http.py), so FastAPI cannot see them;
their path items are built here and merged into the document the app generates.

Frames are described as docs/z4j/agent-protocol.md defines them; the brain parses them itself,
bounded (1 MiB, 128 levels), and checks each field.
"""

from __future__ import annotations

from typing import Any

from z4j_agent.protocol import MAX_FRAME_BYTES

FRAME_TYPES = [
    "hello",
    "hello_ack",
    "event_batch",
    "event_batch_ack",
    "heartbeat",
    "agent_status",
    "registry_delta",
    "command",
    "command_ack",
    "command_result",
    "error",
]
_REF = "#/components/schemas/"
SCHEMAS: dict[str, Any] = {
    "AgentFrame": {
        "type": "object",
        "description": "One frame of the agent protocol, version 2. Every frame but hello and "
        "hello_ack also carries nonce, seq and hmac (signed under the project secret).",
        "required": ["v", "type", "id", "payload"],
        "properties": {
            "v": {"type": "integer", "enum": [2]},
            "type": {"type": "string", "enum": FRAME_TYPES},
            "id": {"type": "string", "minLength": 1, "maxLength": 64},
            "ts": {"type": "string", "description": "ISO 8601 in UTC"},
            "payload": {"type": "object", "additionalProperties": True},
            "nonce": {"type": "string", "maxLength": 32},
            "seq": {"type": "integer", "minimum": 1},
            "hmac": {"type": "string", "pattern": "^[0-9a-f]{64}$"},
        },
        "additionalProperties": True,
    },
    "AgentProblem": {
        "type": "object",
        "description": "A protocol failure: ``code`` is the WebSocket close code it maps to "
        "(4400 bad frame, 4401 bad token, 4403 bad signature, 4426 unsupported version, 4002 "
        "replaced).",
        "required": ["type", "title", "status", "code"],
        "properties": {
            "type": {"type": "string"},
            "title": {"type": "string"},
            "status": {"type": "integer"},
            "code": {"type": ["integer", "string"]},
            "detail": {"type": "string"},
        },
    },
    "AgentCommands": {
        "type": "object",
        "required": ["frames"],
        "properties": {"frames": {"type": "array", "items": {"$ref": _REF + "AgentFrame"}}},
    },
}
_SECURITY: list[dict[str, list[str]]] = [{"agentToken": []}]
_SECURITY_SCHEME = {
    "type": "http",
    "scheme": "bearer",
    "description": "The agent's z4ja_ token (shown once when the agent is created).",
}
_SESSION = {
    "name": "X-Z4J-Session",
    "in": "header",
    "required": True,
    "description": "The session_id of the hello_ack.",
    "schema": {"type": "string"},
}


def _json(schema: str, description: str) -> dict[str, Any]:
    return {
        "description": description,
        "content": {"application/json": {"schema": {"$ref": _REF + schema}}},
    }


def _problems(*statuses: int | str) -> dict[str, Any]:
    problem = {"application/problem+json": {"schema": {"$ref": _REF + "AgentProblem"}}}
    return {
        str(s): {"description": "Protocol failure", "content": problem}
        for s in (*statuses, "4XX", "5XX")
    }


def _frame_body(what: str) -> dict[str, Any]:
    return {
        "required": True,
        "description": f"{what}; at most {MAX_FRAME_BYTES} bytes, nested at most 128 deep.",
        "content": {"application/json": {"schema": {"$ref": _REF + "AgentFrame"}}},
    }


def agent_paths(components: dict[str, Any]) -> dict[str, Any]:
    """The path items of the agent channel; adds their schemas to ``components``."""
    components.setdefault("schemas", {}).update(SCHEMAS)
    components.setdefault("securitySchemes", {})["agentToken"] = _SECURITY_SCHEME
    gone = {"404": {"description": "Unknown or expired session: send hello again."}}
    return {
        "/ws/agent": {
            "get": {
                "tags": ["agents"],
                "summary": "The agent channel (WebSocket)",
                "description": "Upgrade to a WebSocket; the agent sends hello, the brain answers "
                "hello_ack, then both exchange signed frames (docs/z4j/agent-protocol.md). "
                "Failures close the socket with the codes AgentProblem lists.",
                "operationId": "agent_websocket",
                "security": _SECURITY,
                "responses": {"101": {"description": "Switching Protocols"}},
            }
        },
        "/api/v1/agent/hello": {
            "post": {
                "tags": ["agents"],
                "summary": "HTTP fallback: open a session",
                "operationId": "agent_http_hello",
                "security": _SECURITY,
                "requestBody": _frame_body("A hello frame"),
                "responses": {
                    "200": _json("AgentFrame", "The hello_ack, naming the session."),
                    **_problems(400, 401, 403, 409, 413, 426),
                },
            }
        },
        "/api/v1/agent/events": {
            "post": {
                "tags": ["agents"],
                "summary": "HTTP fallback: one signed frame",
                "description": "An event_batch is answered by its signed event_batch_ack, "
                "each event accepted, repaired or refused alone; other frames by 204.",
                "operationId": "agent_http_events",
                "security": _SECURITY,
                "parameters": [_SESSION],
                "requestBody": _frame_body("A signed frame"),
                "responses": {
                    "200": _json("AgentFrame", "The frame's answer (event_batch_ack, error)."),
                    "204": {"description": "Taken; nothing to answer."},
                    **gone,
                    **_problems(400, 401, 403, 409, 413),
                },
            }
        },
        "/api/v1/agent/commands": {
            "get": {
                "tags": ["agents"],
                "summary": "HTTP fallback: long-poll for commands",
                "operationId": "agent_http_commands",
                "security": _SECURITY,
                "parameters": [
                    _SESSION,
                    {
                        "name": "wait",
                        "in": "query",
                        "required": False,
                        "description": "Seconds to hold the poll (0 to 60, default 30).",
                        "schema": {"type": "integer", "minimum": 0, "maximum": 60},
                    },
                ],
                "responses": {
                    "200": _json("AgentCommands", "Commands for the agent (none yet)."),
                    **gone,
                    **_problems(400, 401, 403, 409),
                },
            }
        },
    }
