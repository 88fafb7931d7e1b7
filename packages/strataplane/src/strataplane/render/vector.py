"""The Vector renderer: a composed configuration tree (spec-format.md §4.6) into the TOML that
Vector's ``http`` provider loads (docs/strataplane/agents/vector.md §3).

Global options and components are copied as composed (components keep their ids);
``env://NAME`` becomes ``${NAME}``, which Vector expands because the bootstrap file sets the
provider's ``interpolate_env``. The renderer adds the heartbeat pipeline: Vector's
``internal_metrics`` (a few metrics, scraped once per heartbeat interval) and its WARN and ERROR
``internal_logs`` into an ``http`` sink pointed at strataplane, whose request headers carry the
artifact hash (``artifacts.HASH_PLACEHOLDER``) and the instance id. A reload rebuilds that sink
only when the hash changes, and a rejected reload leaves the old sink, and so the old hash,
running: every heartbeat names the configuration Vector actually runs.

``secret://NAME`` becomes the string ``SECRET[strataplane.NAME]`` (``secret_reference``) and
NAME is recorded in the artifact's ``secret_refs``. The stored artifact never holds a value:
the config endpoint replaces each reference with the value when it serves the artifact to an
agent the Secret admits (agents/vector_secrets.py). Vector's own ``SECRET[...]`` backends do
not apply to a configuration its ``http`` provider loads, so the server is the only place the
value can be put in.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from strataplane.domain.spec.agentconfig import parse_reference
from strataplane.domain.spec.canonical import canonical_bytes
from strataplane.domain.spec.diagnostics import Diagnostic, SpecError
from strataplane.domain.spec.fields import parse_duration
from strataplane.domain.vector_components import GLOBAL_OPTIONS
from strataplane.render.artifacts import HASH_HEADER, HASH_PLACEHOLDER

__all__ = [
    "HEARTBEAT_METRICS",
    "HEARTBEAT_PATH",
    "INSTANCE_ENV",
    "INSTANCE_HEADER",
    "TOKEN_ENV",
    "VectorRender",
    "global_options",
    "render_vector",
]

HEARTBEAT_PATH = "/agents/vector/heartbeat"
TOKEN_ENV = "STRATAPLANE_VECTOR_TOKEN"  # noqa: S105 - the variable's name
INSTANCE_ENV = "STRATAPLANE_INSTANCE_ID"
INSTANCE_HEADER = "X-Strataplane-Instance-Id"
HEARTBEAT_METRICS = ("build_info", "uptime_seconds", "component_errors_total")
_COMPONENTS = ("sources", "transforms", "sinks")
_METRICS, _LOGS, _SINK = "strataplane_metrics", "strataplane_logs", "strataplane_heartbeat"
_REPORT_METRICS, _REPORT_LOGS = "strataplane_report_metrics", "strataplane_report_logs"


SECRET_PREFIX = "SECRET[strataplane."  # noqa: S105 - the reference's form, not a secret


def secret_reference(name: str) -> str:
    return f"{SECRET_PREFIX}{name}]"


@dataclass
class VectorRender:
    content: bytes | None
    diagnostics: list[Diagnostic] = field(default_factory=list)
    secret_names: list[str] = field(default_factory=list)


def global_options(config: Mapping[str, object]) -> dict[str, object]:
    """The part of a configuration whose change Vector refuses to reload."""
    return {k: v for k, v in config.items() if k in GLOBAL_OPTIONS}


def _value(value: object, secrets: list[str]) -> object:
    if isinstance(value, Mapping):
        return {k: _value(v, secrets) for k, v in value.items()}
    if isinstance(value, list):
        return [_value(v, secrets) for v in value]
    ref = parse_reference(value) if isinstance(value, str) else None
    if ref is None:
        return value
    scheme, name = ref
    if name is None:
        return value
    if scheme == "secret":
        secrets.append(name)
        return secret_reference(name)
    if scheme == "env":
        return f"${{{name}}}"
    return value


def _heartbeat(agent_url: str, interval: str) -> dict[str, dict[str, object]]:
    seconds = max(100, parse_duration(interval) or 60_000) / 1000
    names = ", ".join(f'"{n}"' for n in HEARTBEAT_METRICS)
    return {
        "sources": {
            _METRICS: {"type": "internal_metrics", "scrape_interval_secs": seconds},
            _LOGS: {"type": "internal_logs"},
        },
        "transforms": {
            _REPORT_METRICS: {
                "type": "filter",
                "inputs": [_METRICS],
                "condition": f"includes([{names}], .name)",
            },
            _REPORT_LOGS: {
                "type": "filter",
                "inputs": [_LOGS],
                "condition": 'includes(["WARN", "ERROR"], .metadata.level)',
            },
        },
        "sinks": {
            _SINK: {
                "type": "http",
                "inputs": [_REPORT_METRICS, _REPORT_LOGS],
                "uri": agent_url.rstrip("/") + HEARTBEAT_PATH,
                "method": "post",
                "auth": {"strategy": "bearer", "token": f"${{{TOKEN_ENV}}}"},
                "encoding": {"codec": "json"},
                "framing": {"method": "newline_delimited"},
                "batch": {"timeout_secs": 1, "max_events": 200},
                "healthcheck": {"enabled": False},
                "request": {
                    "headers": {
                        HASH_HEADER: HASH_PLACEHOLDER,
                        INSTANCE_HEADER: f"${{{INSTANCE_ENV}}}",
                    }
                },
            },
        },
    }


def render_vector(
    config: Mapping[str, object], *, agent_url: str, heartbeat_interval: str
) -> VectorRender:
    """The TOML of one composition; ``content`` None with diagnostics when it cannot run."""
    secrets: list[str] = []
    doc: dict[str, object] = {k: _value(v, secrets) for k, v in config.items()}
    result = VectorRender(None)
    ids: set[str] = set()
    for section in _COMPONENTS:
        components = doc.get(section)
        if isinstance(components, Mapping):
            ids.update(components)
    sinks = doc.get("sinks")
    for name, sink in sinks.items() if isinstance(sinks, Mapping) else ():
        inputs = sink.get("inputs") if isinstance(sink, Mapping) else None
        for item in inputs if isinstance(inputs, list) else []:
            if isinstance(item, str) and "*" not in item and item not in ids:
                msg = f"sink {name!r} reads {item!r}, which no source or transform has as id"
                result.diagnostics.append(Diagnostic("SP-5008", None, f"config.sinks.{name}", msg))
    if not any(isinstance(doc.get(s), Mapping) and doc[s] for s in ("sources",)):
        msg = "no source applies to this agent; Vector has nothing to run"
        result.diagnostics.append(Diagnostic("SP-5001", None, "config.sources", msg))
    if result.diagnostics:
        return result
    for section, components in _heartbeat(agent_url, heartbeat_interval).items():
        existing = doc.get(section)
        doc[section] = {**(existing if isinstance(existing, Mapping) else {}), **components}
    try:
        content = canonical_bytes(doc)
    except SpecError as exc:
        result.diagnostics += exc.diagnostics
        return result
    if content.count(HASH_PLACEHOLDER.encode()) != 1:
        msg = "the configuration contains the renderer's hash placeholder"
        result.diagnostics.append(Diagnostic("SP-5001", None, None, msg))
        return result
    if content.count(SECRET_PREFIX.encode()) != len(secrets):
        # a literal reference would be replaced with a value where the spec put none
        msg = f"the configuration contains the renderer's secret reference {SECRET_PREFIX!r}"
        result.diagnostics.append(Diagnostic("SP-5001", None, None, msg))
        return result
    result.content = content
    result.secret_names = sorted(set(secrets))
    return result
