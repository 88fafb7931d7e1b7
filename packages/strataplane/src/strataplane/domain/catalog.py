"""The plugin catalog's rules (schema: catalog_bundle, plugin_schema): signed bundles, the bundle
an agent version uses, and the check of a Telegraf configuration against a bundle's JSON
Schemas, as Telegraf's own loader would judge it. Pure functions.

A bundle is the canonical JSON of ``{format, agentKind, version, source, plugins}`` where
``plugins[section][plugin]`` is a JSON Schema 2020-12 object schema whose ``properties`` are the
plugin's options; ``x-dataFormat`` says that the plugin also takes the options of the parser or
serializer its ``data_format`` names (Telegraf unmarshals one table into both), and an option's
``x-deprecated`` carries Telegraf's deprecation tag (since, removal, notice). Its hash is the
SHA-256 of those bytes; the signature is Ed25519 over the hash.
"""

from __future__ import annotations

import base64
import difflib
import hashlib
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from strataplane.domain.spec.versions import parse_version

__all__ = [
    "SECTIONS",
    "Bundle",
    "Finding",
    "check_telegraf",
    "parse_bundle",
    "pick_bundle",
    "plugin_line",
    "verify_signature",
]

SECTIONS = (
    "inputs",
    "outputs",
    "processors",
    "aggregators",
    "parsers",
    "serializers",
    "secretstores",
)
_CONFIG_SECTIONS = ("inputs", "outputs", "processors", "aggregators", "secretstores")
_DEFAULT_FORMAT = {"parsers": "influx", "serializers": "influx"}


class BundleError(ValueError):
    """A bundle that is not one (bad JSON, wrong shape)."""


@dataclass(frozen=True)
class Bundle:
    agent_kind: str
    version: str
    hash: bytes
    source: str
    plugins: Mapping[str, Mapping[str, Mapping[str, Any]]]

    @property
    def validator(self) -> str:
        return f"{self.agent_kind} {self.version} catalog schema"


@dataclass(frozen=True)
class Finding:
    """One reason Telegraf would refuse the configuration."""

    section: str
    plugin: str
    alias: str | None
    option: str | None
    message: str
    fix: str | None = None

    @property
    def where(self) -> str:
        name = f"{self.section}.{self.plugin}"
        if self.alias:
            name += f" ({self.alias})"
        return f"{name} option {self.option}" if self.option else name

    def text(self) -> str:
        return f"{self.where}: {self.message}" + (f"; {self.fix}" if self.fix else "")


def verify_signature(body: bytes, signature_b64: str, trusted: Iterable[bytes]) -> bytes | None:
    """The bundle's hash when one of the trusted raw Ed25519 public keys verifies it."""
    digest = hashlib.sha256(body).digest()
    try:
        signature = base64.b64decode(signature_b64.strip(), validate=True)
    except ValueError:
        return None
    for raw in trusted:
        try:
            Ed25519PublicKey.from_public_bytes(raw).verify(signature, digest)
        except (InvalidSignature, ValueError):
            continue
        return digest
    return None


def parse_bundle(body: bytes) -> Bundle:
    try:
        doc = json.loads(body)
    except ValueError as exc:
        raise BundleError("the bundle is not JSON") from exc
    if not isinstance(doc, dict) or doc.get("format") != 1:
        raise BundleError("the bundle has no format 1 header")
    plugins = doc.get("plugins")
    if not isinstance(plugins, dict) or any(s not in SECTIONS for s in plugins):
        raise BundleError("the bundle's plugins are not sections of plugin schemas")
    try:
        parse_version(str(doc.get("version")))
    except ValueError as exc:
        raise BundleError("the bundle's version is not a version") from exc
    return Bundle(
        str(doc.get("agentKind")),
        str(doc["version"]),
        hashlib.sha256(body).digest(),
        str(doc.get("source", "")),
        plugins,
    )


def pick_bundle(versions: Sequence[str], agent_version: str | None) -> str | None:
    """The bundle that describes an agent version: the same version, else the newest bundle of
    the same major.minor release line (patch releases add no options); None without one."""
    if agent_version is None:
        return None
    try:
        wanted = parse_version(agent_version)
    except ValueError:
        return None
    if agent_version in versions:
        return agent_version
    same = [v for v in versions if _line(v) == (wanted.major, wanted.minor)]
    return max(same, key=parse_version) if same else None


def _line(version: str) -> tuple[int, int] | None:
    try:
        v = parse_version(version)
    except ValueError:
        return None
    return v.major, v.minor


_TYPES = {
    "string": lambda v: isinstance(v, str),
    "boolean": lambda v: isinstance(v, bool),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, int | float) and not isinstance(v, bool),
    "array": lambda v: isinstance(v, list),
    "object": lambda v: isinstance(v, Mapping),
}


def _conforms(schema: Mapping[str, Any], value: object) -> bool:
    """The JSON Schema keywords the catalog's option schemas use: type, items,
    additionalProperties (a schema)."""
    wanted = schema.get("type")
    if wanted is not None:
        names = wanted if isinstance(wanted, list) else [wanted]
        if not any(_TYPES.get(n, lambda _: True)(value) for n in names):
            return False
    items = schema.get("items")
    if isinstance(items, Mapping) and isinstance(value, list):
        return all(_conforms(items, v) for v in value)
    extra = schema.get("additionalProperties")
    if isinstance(extra, Mapping) and isinstance(value, Mapping):
        return all(_conforms(extra, v) for v in value.values())
    return True


def _type_error(schema: Mapping[str, Any], value: object) -> str | None:
    if _conforms(schema, value):
        return None
    wanted = schema.get("type")
    wanted_text = " or ".join(wanted) if isinstance(wanted, list) else str(wanted)
    items = schema.get("items")
    if wanted == "array" and isinstance(items, Mapping) and isinstance(value, list):
        wanted_text = f"array of {items.get('type')}"
    return f"must be {wanted_text} ({schema.get('x-go', 'Go type')}), not {_json_type(value)}"


_EXAMPLES = {
    "boolean": "true or false, without quotes",
    "integer": "a whole number, without quotes",
    "number": "a number, without quotes",
    "string": "a quoted string",
    "array": "a list in [ ]",
    "object": "a table",
}


def _type_fix(key: str, schema: Mapping[str, Any]) -> str:
    wanted = schema.get("type")
    kinds = wanted if isinstance(wanted, list) else [wanted]
    return f"write {key} as " + " or ".join(_EXAMPLES.get(str(k), str(k)) for k in kinds)


def _json_type(value: object) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "table" if isinstance(value, Mapping) else type(value).__name__


def _removed(meta: Mapping[str, Any], version: str) -> bool:
    try:
        return not parse_version(version) < parse_version(str(meta["removal"]))
    except (KeyError, ValueError):
        return False


def _suggest(word: str, choices: Iterable[str]) -> str | None:
    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return close[0] if close else None


def check_plugin(
    bundle: Bundle,
    section: str,
    plugin: str,
    options: Mapping[str, object],
    *,
    skip_value: Any = None,
) -> list[Finding]:
    """Findings for one plugin instance's options (``skip_value(v)`` true: the value is a
    reference resolved later, its type is not checked)."""
    given = options.get("alias")
    alias = given if isinstance(given, str) else None
    known = bundle.plugins.get(section, {})
    schema = known.get(plugin)
    if schema is None:
        near = _suggest(plugin, known)
        fix: str | None = (
            f"did you mean {section}.{near}?" if near else f"no {section} plugin of that name"
        )
        msg = f"unknown plugin: Telegraf {bundle.version} has no {section}.{plugin}"
        return [Finding(section, plugin, alias, None, msg, fix)]
    props: dict[str, Any] = dict(schema.get("properties", {}))
    found: list[Finding] = []
    extra = schema.get("x-dataFormat")
    if isinstance(extra, str):
        fmt = options.get("data_format", _DEFAULT_FORMAT.get(extra, "influx"))
        formats = bundle.plugins.get(extra, {})
        if isinstance(fmt, str) and fmt in formats:
            props.update(formats[fmt].get("properties", {}))
        elif isinstance(fmt, str):
            near = _suggest(fmt, formats)
            fix = f'did you mean data_format = "{near}"?' if near else None
            kind = extra.rstrip("s")
            msg = f"undefined but requested {kind}: {fmt}"
            found.append(Finding(section, plugin, alias, "data_format", msg, fix))
    closed = schema.get("additionalProperties") is False or isinstance(extra, str)
    for key in sorted(options):
        value = options[key]
        prop = props.get(key)
        if prop is None:
            if closed:
                near = _suggest(key, props)
                fix = f"did you mean {near}?" if near else "remove it"
                msg = f"unknown option (Telegraf {bundle.version} does not use it)"
                found.append(Finding(section, plugin, alias, key, msg, fix))
            continue
        meta = prop.get("x-deprecated")
        if isinstance(meta, Mapping) and _removed(meta, bundle.version):
            msg = (
                f"removed in Telegraf {meta.get('removal')} (deprecated since {meta.get('since')})"
            )
            found.append(Finding(section, plugin, alias, key, msg, str(meta.get("notice") or "")))
            continue
        if skip_value is not None and skip_value(value):
            continue
        wrong = _type_error(prop, value)
        if wrong:
            found.append(Finding(section, plugin, alias, key, wrong, _type_fix(key, prop)))
    return found


def check_telegraf(bundle: Bundle, config: Mapping[str, object]) -> list[Finding]:
    """Every finding for a parsed rendered Telegraf configuration (``[[section.plugin]]``
    arrays of tables), in document order."""
    found: list[Finding] = []
    for section in _CONFIG_SECTIONS:
        plugins = config.get(section)
        if not isinstance(plugins, Mapping):
            continue
        for plugin, instances in plugins.items():
            for options in instances if isinstance(instances, list) else [instances]:
                if isinstance(options, Mapping):
                    found += check_plugin(bundle, section, plugin, options)
    return found


_HEADER = re.compile(r"^\[\[([a-z]+)\.([A-Za-z0-9_]+)\]\]\s*$")


def plugin_line(text: str, finding: Finding) -> int | None:
    """The line (from 1) of the finding's option, or of its plugin's header, in rendered TOML:
    the header whose table has the finding's alias (or the first of its plugin)."""
    lines = text.splitlines()
    start = None
    for i, line in enumerate(lines):
        m = _HEADER.match(line)
        if start is not None and (m or line.startswith("[")):
            if _alias_in(lines[start + 1 : i], finding.alias):
                break
            start = None
        if m and (m.group(1), m.group(2)) == (finding.section, finding.plugin):
            start = i
    if start is None:
        return None
    if finding.option:
        for j in range(start + 1, len(lines)):
            if lines[j].startswith("["):
                break
            if lines[j].split("=", 1)[0].strip().strip('"') == finding.option:
                return j + 1
    return start + 1


def _alias_in(body: list[str], alias: str | None) -> bool:
    if alias is None:
        return True
    return any(line.replace(" ", "") == f'alias="{alias}"' for line in body)
