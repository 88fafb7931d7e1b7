"""The Telegraf renderer: a composed configuration tree (spec-format.md §4.6) into TOML.

Each keyed plugin instance ``<section>.<plugin>.<instance>`` becomes one ``[[section.plugin]]``
whose ``alias`` is the instance key. ``secret://NAME`` becomes a reference to the renderer's
``secretstores.http`` store, ``env://NAME`` becomes ``${NAME}``; nothing else can carry ``${``
because validation rejects it (SP-4006). The renderer adds ``outputs.heartbeat``, whose headers
carry the artifact hash (see ``artifacts.HASH_PLACEHOLDER``) so every heartbeat proves what is
applied. Bytes are written by the canonical TOML writer, so equal trees give equal bytes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache

from strataplane.domain.spec.agentconfig import parse_reference
from strataplane.domain.spec.canonical import canonical_bytes
from strataplane.domain.spec.diagnostics import Diagnostic, SpecError
from strataplane.domain.spec.versions import parse_version
from strataplane.render.artifacts import HASH_HEADER, HASH_PLACEHOLDER

__all__ = [
    "HEARTBEAT_PATH",
    "SECRET_STORE",
    "TelegrafRender",
    "heartbeat_reports",
    "render_choices",
    "render_telegraf",
    "token_env",
]

PLUGIN_SECTIONS = ("inputs", "processors", "aggregators", "outputs")
SECRET_STORE = "strataplane"  # noqa: S105 - the secret store id, not a secret
HEARTBEAT_PATH = "/agents/telegraf/heartbeat"
SECRETS_PATH = "/agents/telegraf/secrets"
INSTANCE_ENV = "STRATAPLANE_INSTANCE_ID"
_CONTROLLER_TOKEN_SINCE = parse_version("1.39.0")
_HEARTBEAT_LOGS_SINCE = parse_version("1.38.0")  # outputs.heartbeat logs, status


@dataclass
class TelegrafRender:
    content: bytes | None
    secret_names: list[str] = field(default_factory=list)
    diagnostics: list[Diagnostic] = field(default_factory=list)


@lru_cache(maxsize=1024)
def token_env(version: str | None) -> str:
    """The variable Telegraf takes its config-URL token from: TELEGRAF_CONTROLLER_TOKEN from
    1.39.0 (sent as Bearer), INFLUX_TOKEN before (sent as Token)."""
    try:
        newer = version is not None and not parse_version(version) < _CONTROLLER_TOKEN_SINCE
    except ValueError:
        newer = False
    return "TELEGRAF_CONTROLLER_TOKEN" if newer else "INFLUX_TOKEN"


@lru_cache(maxsize=1024)
def heartbeat_reports(version: str | None) -> tuple[str, ...]:
    """What the rendered heartbeat includes: Telegraf 1.37's outputs.heartbeat has no ``logs``
    or ``status`` option and its Init refuses any other ``include`` than hostname, statistics
    and configs; both came with 1.38.0."""
    try:
        full = version is not None and not parse_version(version) < _HEARTBEAT_LOGS_SINCE
    except ValueError:
        full = False
    base = ("hostname", "statistics", "configs")
    return (*base, "logs", "status") if full else base


def render_choices(version: str | None) -> str:
    """Everything the renderer decides from the agent version, as one cache key part."""
    return f"{token_env(version)}:{','.join(heartbeat_reports(version))}"


def _value(value: object, secrets: set[str]) -> object:
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
        secrets.add(name)
        return f"@{{{SECRET_STORE}:{name}}}"
    if scheme == "env":
        return f"${{{name}}}"
    return value  # param:// is resolved by compose; a leftover one was reported there


def _plugins(section: Mapping[str, object], secrets: set[str]) -> dict[str, object]:
    out: dict[str, object] = {}
    for plugin in sorted(section):
        instances = section[plugin]
        if not isinstance(instances, Mapping):
            continue
        out[plugin] = [
            {**{k: _value(v, secrets) for k, v in options.items()}, "alias": key}
            for key, options in sorted(instances.items())
            if isinstance(options, Mapping)
        ]
    return out


def render_telegraf(
    config: Mapping[str, object],
    *,
    agent_url: str,
    heartbeat_interval: str,
    version: str | None,
    tls: Mapping[str, str] | None = None,
) -> TelegrafRender:
    """The TOML of one composition; ``content`` None with diagnostics when it cannot run.
    ``tls`` (Settings ``telegraf.tls``: ``ca``, ``cert``, ``key``) goes to the two plugins that
    talk to this server, the heartbeat and the secret store, as their ``tls_*`` options: a
    client certificate there raises the agent's assurance."""
    client_tls = {f"tls_{k}": _value(v, set()) for k, v in sorted((tls or {}).items())}
    secrets: set[str] = set()
    doc: dict[str, object] = {}
    for section, value in config.items():
        if section in PLUGIN_SECTIONS and isinstance(value, Mapping):
            doc[section] = _plugins(value, secrets)
        else:
            doc[section] = _value(value, secrets)
    result = TelegrafRender(None)
    if not doc.get("inputs"):
        msg = "no input plugin applies to this agent; Telegraf refuses to start without one"
        result.diagnostics.append(Diagnostic("SP-5001", None, "config.inputs", msg))
        return result
    token = f"${{{token_env(version)}}}"
    outputs = doc.setdefault("outputs", {})
    assert isinstance(outputs, dict)
    reports = heartbeat_reports(version)
    heartbeat: dict[str, object] = {
        "url": agent_url.rstrip("/") + HEARTBEAT_PATH,
        "instance_id": f"${{{INSTANCE_ENV}}}",
        "token": token,
        "interval": heartbeat_interval,
        "include": list(reports),
        "headers": {HASH_HEADER: HASH_PLACEHOLDER},
        **client_tls,
    }
    if "logs" in reports:
        heartbeat["logs"] = {"limit": 20, "level": "WARN"}
    outputs["heartbeat"] = [heartbeat]
    if secrets:
        doc["secretstores"] = {
            "http": [
                {
                    "id": SECRET_STORE,
                    "url": agent_url.rstrip("/") + SECRETS_PATH,
                    "token": token,
                    **client_tls,
                }
            ]
        }
    try:
        content = canonical_bytes(doc)
    except SpecError as exc:
        result.diagnostics += exc.diagnostics
        return result
    if content.count(HASH_PLACEHOLDER.encode()) != 1:
        msg = "the configuration contains the renderer's hash placeholder"
        result.diagnostics.append(Diagnostic("SP-5001", None, None, msg))
        return result
    result.content = content
    result.secret_names = sorted(secrets)
    return result
