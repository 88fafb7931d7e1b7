"""The agents' endpoints in the OpenAPI document. They are served ahead of FastAPI
(agents/front.py), so FastAPI cannot see them; their path items are built here from the models
below and merged into the document the app generates (``StrataplaneApp.openapi``).

The models describe Telegraf's ``outputs.heartbeat`` schema v1 as the server reads it
(agents/heartbeat.py parses bodies itself, for speed, and checks the same rules).
"""

from __future__ import annotations

from typing import Any, Literal

from platformkit.http import problem_responses
from pydantic import BaseModel, ConfigDict, Field

from strataplane.agents.elastic import ACKS_PATH as ELASTIC_ACKS
from strataplane.agents.elastic import CHECKIN_PATH as ELASTIC_CHECKIN
from strataplane.agents.elastic import ENROLL_PATH as ELASTIC_ENROLL
from strataplane.agents.telegraf import CONFIG_PATH, HEARTBEAT_PATH, MAX_HEARTBEAT
from strataplane.agents.vector import CONFIG_PATH as VECTOR_CONFIG
from strataplane.agents.vector import HEARTBEAT_PATH as VECTOR_HEARTBEAT
from strataplane.agents.vector import MAX_HEARTBEAT as VECTOR_MAX
from strataplane.domain.hostnames import MAX_HOST_NAME


class HeartbeatStatistics(BaseModel):
    errors: int = Field(0, ge=0, description="Errors logged since the last successful send.")
    warnings: int = Field(0, ge=0)
    metrics: int = Field(0, ge=0)


class HeartbeatLog(BaseModel):
    model_config = ConfigDict(extra="allow")

    time: str | None = Field(None, description="RFC 3339.")
    level: Literal["ERROR", "WARN", "INFO", "DEBUG", "TRACE"] | None = None
    source: str | None = Field(None, description="plugin::alias, e.g. inputs.http::portal.")
    attributes: dict[str, Any] | None = None
    message: str


class Heartbeat(BaseModel):
    """``outputs.heartbeat`` schema v1. Refused with 422 ``agent.bad_report`` naming the
    field: an ``id`` other than the instance_id the credential was enrolled with, a ``status``
    outside the enum, a ``hostname`` that is not an RFC 1123 host name, another schema. Text
    PostgreSQL cannot store (NUL, lone surrogates) in logs and configurations is replaced by
    U+FFFD and the report marked (facts.repaired)."""

    model_config = ConfigDict(extra="allow")

    id: str = Field(description="The agent's instance_id.")
    version: str = Field(description='"Telegraf 1.37.0".')
    schema_: Literal[1] = Field(1, alias="schema")
    last: int | None = Field(None, description="Unix time of the last failed send.")
    hostname: str | None = Field(None, max_length=MAX_HOST_NAME + 1)
    configurations: list[str] | None = None
    statistics: HeartbeatStatistics | None = None
    logs: list[HeartbeatLog] | None = None
    status: Literal["OK", "WARN", "FAIL", "UNDEFINED"] | None = None


_AGENT_SECURITY: list[dict[str, list[str]]] = [{"agentCredential": []}]
_SECURITY_SCHEME = {
    "type": "http",
    "scheme": "bearer",
    "description": "The agent's spt_ credential (also accepted as `Authorization: Token spt_...`)"
    " or spv_ credential (Vector).",
}
_LAST_MODIFIED = {"Last-Modified": {"schema": {"type": "string"}}}


def _problems(*statuses: int) -> dict[str, Any]:
    return {str(k): v for k, v in problem_responses(*statuses).items()}


def _config(head: bool) -> dict[str, Any]:
    ok: dict[str, Any] = {"description": "As GET, without a body.", "headers": _LAST_MODIFIED}
    if not head:
        toml = {"application/toml": {"schema": {"type": "string"}}}
        what = "The agent's desired artifact (with a class token: the class's, telegraf.md §7)."
        ok = {"description": what, "headers": _LAST_MODIFIED}
        ok["content"] = toml
    return {
        "tags": ["agents"],
        "summary": "Telegraf's configuration URL" + (" (watcher)" if head else ""),
        "operationId": "telegraf_config_head" if head else "telegraf_config_get",
        "security": _AGENT_SECURITY,
        "parameters": [
            {"name": "User-Agent", "in": "header", "required": False, "schema": {"type": "string"}}
        ],
        "responses": {"200": ok, **_problems(401, 403, 503)},
    }


def agent_paths(components: dict[str, Any]) -> dict[str, Any]:
    """The path items of the agent endpoints; adds their schemas to ``components``."""
    schemas = components.setdefault("schemas", {})
    for model in (Heartbeat, HeartbeatStatistics, HeartbeatLog):
        found = model.model_json_schema(ref_template="#/components/schemas/{model}", by_alias=True)
        for name, sub in found.pop("$defs", {}).items():
            schemas.setdefault(name, sub)
        schemas[model.__name__] = found
    components.setdefault("securitySchemes", {})["agentCredential"] = _SECURITY_SCHEME
    components["securitySchemes"]["fleetApiKey"] = {
        "type": "apiKey",
        "in": "header",
        "name": "Authorization",
        "description": "`ApiKey <key>`: the enrollment token to enroll, then the spe_ access key.",
    }
    heartbeat = {
        "tags": ["agents"],
        "summary": "Telegraf outputs.heartbeat",
        "operationId": "telegraf_heartbeat",
        "security": _AGENT_SECURITY,
        "parameters": [
            {
                "name": "X-Strataplane-Config-Hash",
                "in": "header",
                "required": False,
                "description": "The applied artifact's hash (hex), rendered into the config.",
                "schema": {"type": "string"},
            }
        ],
        "requestBody": {
            "required": True,
            "description": f"At most {MAX_HEARTBEAT} bytes, JSON nested at most 32 deep.",
            "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Heartbeat"}}},
        },
        "responses": {"200": {"description": "Queued."}, **_problems(401, 405, 413, 422)},
    }
    return {
        CONFIG_PATH: {"get": _config(head=False), "head": _config(head=True)},
        HEARTBEAT_PATH: {"post": heartbeat},
        **_vector_paths(),
        **_fleet_paths(),
    }


def _fleet_paths() -> dict[str, Any]:
    """Elastic Agent's Fleet Server endpoints (agents/elastic.py); errors in Fleet's shape."""
    fleet_error = {
        "description": "Refused: Fleet Server's error body.",
        "content": {
            "application/json": {
                "schema": {
                    "type": "object",
                    "properties": {
                        "statusCode": {"type": "integer"},
                        "error": {"type": "string"},
                        "message": {"type": "string"},
                    },
                }
            }
        },
    }
    obj = {"application/json": {"schema": {"type": "object"}}}

    busy = {
        **fleet_error,
        "description": "Busy: too many check-in rounds wait on this worker; retry later.",
        "headers": {"Retry-After": {"schema": {"type": "integer"}}},
    }

    def op(name: str, summary: str, gated: bool = True) -> dict[str, Any]:
        return {
            "tags": ["agents"],
            "summary": summary,
            "operationId": name,
            "security": [{"fleetApiKey": []}],
            "requestBody": {"required": True, "content": obj},
            "responses": {
                "200": {"description": "As fleet-server's model/openapi.yml.", "content": obj},
                **{str(s): fleet_error for s in (400, 401, 403, 413)},
                **({"503": busy} if gated else {}),
            },
        }

    return {
        ELASTIC_ENROLL: {
            "post": op("fleet_enroll", "Enroll an Elastic Agent (enrollment key)", gated=False)
        },
        ELASTIC_CHECKIN: {"post": op("fleet_checkin", "Elastic Agent check-in (long poll)")},
        ELASTIC_ACKS: {"post": op("fleet_acks", "Elastic Agent action acknowledgements")},
    }


def _vector_paths() -> dict[str, Any]:
    toml = {"application/toml": {"schema": {"type": "string"}}}
    config = {
        "tags": ["agents"],
        "summary": "Vector's http provider URL",
        "description": "The whole configuration on every poll; Vector reloads what differs.",
        "operationId": "vector_config_get",
        "security": _AGENT_SECURITY,
        "responses": {
            "200": {"description": "The agent's desired artifact.", "content": toml},
            **_problems(401, 403, 503),
        },
    }
    heartbeat = {
        "tags": ["agents"],
        "summary": "The rendered heartbeat sink of Vector",
        "operationId": "vector_heartbeat",
        "security": _AGENT_SECURITY,
        "parameters": [
            {
                "name": name,
                "in": "header",
                "required": name.endswith("Instance-Id"),
                "description": what,
                "schema": {"type": "string"},
            }
            for name, what in (
                ("X-Strataplane-Config-Hash", "The applied artifact's hash (hex)."),
                ("X-Strataplane-Instance-Id", "The instance id the agent enrolled with."),
            )
        ],
        "requestBody": {
            "required": True,
            "description": (
                f"Newline-delimited JSON events (internal_metrics and WARN/ERROR internal_logs),"
                f" at most {VECTOR_MAX} bytes and 1000 events, each nested at most 32 deep."
            ),
            "content": {"application/x-ndjson": {"schema": {"type": "string"}}},
        },
        "responses": {"200": {"description": "Queued."}, **_problems(401, 405, 413, 422)},
    }
    return {VECTOR_CONFIG: {"get": config}, VECTOR_HEARTBEAT: {"post": heartbeat}}
