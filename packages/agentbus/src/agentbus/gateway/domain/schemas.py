"""The registered ``agentbus.*`` types and their ``data`` schemas (conventions §3.3, §4): step 5
of 04-API-SPEC §4.1.

Schemas are package data, ``gateway/domain/schemas/<type>.json`` (JSON Schema 2020-12, closed
except ``metadata``). ``check_type_and_data`` runs, in order: the type and its ``dataschema`` URL
(AB-2006), the per-type attribute rules (AB-2002, AB-2003), the canonical size of ``data``
(AB-5001), integers within +-(2^53-1) (AB-2018), the schema (AB-2007) and the 4 KiB
``metadata`` cap (AB-2007). It returns the canonical plaintext and its SHA-256.
"""

from __future__ import annotations

import json
from functools import cache
from importlib.resources import files
from typing import Any

from jsonschema import Draft202012Validator  # type: ignore[import-untyped]  # ships no type information
from wirekit import canonical_json

from agentbus.gateway.domain import errors as e
from agentbus.gateway.domain.envelope import Parsed
from agentbus.gateway.domain.wire import payload_digest
from agentbus.ids import format_id

SCHEMA_BASE = "https://agentbus.exchange/schemas/"
MESSAGE = "agentbus.message.v1"
TASK_REQUEST = "agentbus.task.request.v1"
TASK_LIFECYCLE = frozenset(
    f"agentbus.task.{verb}.v1"
    for verb in ("accept", "reject", "progress", "complete", "fail", "cancel")
)
TYPES = frozenset({MESSAGE, TASK_REQUEST} | TASK_LIFECYCLE)
MAX_PAYLOAD = 262144
MAX_METADATA = 4096
MAX_INT = 2**53 - 1


def schema_of(type_name: str) -> dict[str, Any]:
    schema: dict[str, Any] = json.loads(
        (files("agentbus.gateway.domain") / "schemas" / f"{type_name}.json").read_text()
    )
    return schema


def inline_local_refs(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` with every ``{"$ref": "#/$defs/<name>"}`` replaced by the definition (siblings
    of the ``$ref`` kept beside it under ``allOf``), and ``$defs`` dropped.

    The same assertions in the same places, so the same errors at the same data paths, but the
    validator no longer resolves a reference for every value it checks (about 100 µs against
    30 µs for a short message). A definition that refers to itself keeps its ``$ref``."""
    defs = schema.get("$defs", {})
    kept: set[str] = set()  # references left in place: recursive definitions

    def walk(node: Any, seen: tuple[str, ...]) -> Any:
        if isinstance(node, list):
            return [walk(item, seen) for item in node]
        if not isinstance(node, dict):
            return node
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/$defs/"):
            if ref in seen:
                kept.add(ref)
            else:
                target = walk(defs[ref.removeprefix("#/$defs/")], (*seen, ref))
                rest = {k: walk(v, seen) for k, v in node.items() if k != "$ref"}
                return {**rest, "allOf": [target]} if rest else target
        return {k: walk(v, seen) for k, v in node.items() if k != "$defs"}

    inlined: dict[str, Any] = walk(schema, ())
    if kept:
        inlined["$defs"] = defs  # a recursive definition still points into them
    return inlined


@cache
def validator(type_name: str) -> Any:
    schema = schema_of(type_name)
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(inline_local_refs(schema))


def _pointer(path: Any) -> str:
    return "/data" + "".join(f"/{part}" for part in path)


def _too_big(value: Any, path: str = "/data") -> str | None:
    if type(value) is int and abs(value) > MAX_INT:
        return path
    children = (
        value.items()
        if isinstance(value, dict)
        else enumerate(value)
        if isinstance(value, list)
        else ()
    )
    for key, item in children:
        found = _too_big(item, f"{path}/{key}")
        if found:
            return found
    return None


def check_type_rules(env: Parsed) -> None:
    """Which of subject, correlation, idempotencykey and capability each type needs."""
    kind = env.type
    present = set(env.raw)
    if kind == MESSAGE:
        if "subject" in present:
            raise e.AttributeInvalid("agentbus.message.v1 has no subject", attribute="subject")
        return
    if kind == TASK_REQUEST:
        missing = [a for a in ("idempotencykey", "capability", "subject") if a not in present]
        if missing:
            raise e.AttributeMissing(
                f"a task request needs {', '.join(missing)}", attributes=missing
            )
        if env.raw["subject"] != format_id("tsk", env.msg_id):
            raise e.AttributeInvalid("a task request's subject is the tsk_ form of its id")
        return
    missing = [a for a in ("subject", "correlation") if a not in present]
    if missing:
        raise e.AttributeMissing(f"{kind} needs {', '.join(missing)}", attributes=missing)
    if env.subject_id != env.correlation_id:
        raise e.AttributeInvalid("correlation must be the msg_ id of the task's request")
    if "capability" in present:
        raise e.AttributeInvalid(f"{kind} carries no capability", attribute="capability")


def check_type_and_data(env: Parsed) -> tuple[bytes, bytes]:
    kind = env.type
    if kind not in TYPES:
        raise e.TypeUnknown(f"type {kind!r} is not registered")
    if env.raw["dataschema"] != f"{SCHEMA_BASE}{kind}.json":
        raise e.TypeUnknown(f"dataschema must be {SCHEMA_BASE}{kind}.json")
    check_type_rules(env)
    plain, digest = payload_digest(env.data)
    if len(plain) > MAX_PAYLOAD:
        raise e.PayloadTooLarge(
            f"data is {len(plain)} bytes canonical, over {MAX_PAYLOAD}", limit=MAX_PAYLOAD
        )
    where = _too_big(env.data)
    if where:
        raise e.NumberOutOfRange("an integer is outside +-(2^53-1)", errors=[{"pointer": where}])
    problems = sorted(validator(kind).iter_errors(env.data), key=lambda err: list(err.path))
    if problems:
        errors = [{"pointer": _pointer(p.path), "reason": p.message[:200]} for p in problems[:20]]
        raise e.DataInvalid(f"data fails {kind}: {problems[0].message[:200]}", errors=errors)
    metadata = env.data.get("metadata")
    if metadata is not None and len(canonical_json(metadata)) > MAX_METADATA:
        raise e.DataInvalid(
            "metadata is over 4096 bytes canonical", errors=[{"pointer": "/data/metadata"}]
        )
    return plain, digest
