"""Validation level 1 against the catalog: the plugin instances of every Layer, Bundle and Route
of a tree, checked against the plugin schemas of each catalog bundle whose version the object
can run on (a Layer's ``agentVersions``; Bundles and Routes any imported version). A finding is
an SP-2010 naming the file, the line, the plugin and option, and a fix. Pure."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from strataplane.domain.catalog import Bundle, Finding, check_plugin
from strataplane.domain.spec.agentconfig import parse_reference
from strataplane.domain.spec.diagnostics import Diagnostic
from strataplane.domain.spec.objects import Facts
from strataplane.domain.spec.versions import parse_version

__all__ = ["check_catalog", "line_of"]

_SECTIONS = ("inputs", "processors", "aggregators", "outputs")
_KINDS = ("Layer", "Bundle", "Route")


def _reference(value: object) -> bool:
    return isinstance(value, str) and parse_reference(value) is not None


def line_of(text: str, table: str, key: str | None) -> int | None:
    """The line (from 1) of ``key`` in the canonical table ``[table]``, or of its header."""
    lines = text.splitlines()
    header = f"[{table}]"
    for i, line in enumerate(lines):
        if line.strip() != header:
            continue
        if key is None:
            return i + 1
        for j in range(i + 1, len(lines)):
            if lines[j].startswith("["):
                break
            if lines[j].split("=", 1)[0].strip().strip('"') == key:
                return j + 1
        return i + 1
    return None


def check_catalog(
    values: Mapping[str, Mapping[str, object]],
    facts: Mapping[str, Facts],
    texts: Mapping[str, bytes],
    bundles: Sequence[Bundle],
) -> list[Diagnostic]:
    found: list[Diagnostic] = []
    for path in sorted(values):
        fact = facts.get(path)
        if fact is None or fact.id.kind not in _KINDS or fact.agent_kind != "telegraf":
            continue
        usable = [
            b
            for b in bundles
            if b.agent_kind == "telegraf"
            and (
                fact.agent_versions is None or fact.agent_versions.matches(parse_version(b.version))
            )
        ]
        config = values[path].get("config")
        if not usable or not isinstance(config, Mapping):
            continue
        text = texts.get(path, b"").decode(errors="replace")
        for section in _SECTIONS:
            plugins = config.get(section)
            if not isinstance(plugins, Mapping):
                continue
            for plugin in sorted(plugins):
                instances = plugins[plugin]
                if not isinstance(instances, Mapping):
                    continue
                for key in sorted(instances):
                    options = instances[key]
                    if isinstance(options, Mapping):
                        found += _instance(
                            path, text, section, plugin, key, options, usable, bundles
                        )
    return found


def _instance(
    path: str,
    text: str,
    section: str,
    plugin: str,
    key: str,
    options: Mapping[str, object],
    bundles: Sequence[Bundle],
    catalogued: Sequence[Bundle],
) -> list[Diagnostic]:
    """One diagnostic per distinct finding, with the versions it holds for; an option unknown
    to those versions that another catalogued version has was removed or is not there yet."""
    by_finding: dict[tuple[str | None, str, str | None], tuple[Finding, list[str]]] = {}
    for bundle in sorted(bundles, key=lambda b: parse_version(b.version)):
        for f in check_plugin(bundle, section, plugin, options, skip_value=_reference):
            generic = f.message.replace(f"Telegraf {bundle.version}", "Telegraf")
            entry = by_finding.setdefault((f.option, generic, f.fix), (f, []))
            entry[1].append(bundle.version)
    out = []
    table = f"config.{section}.{plugin}.{key}"
    for (option, generic, fix), (_, versions) in by_finding.items():
        line = line_of(text, table, option)
        where = f"{section}.{plugin}" + (f" option {option}" if option else "")
        scope = "Telegraf " + ", ".join(versions)
        if option is not None and generic.startswith("unknown option"):
            has = [
                b.version
                for b in catalogued
                if option in b.plugins.get(section, {}).get(plugin, {}).get("properties", {})
            ]
            if has:
                scope += f"; Telegraf {', '.join(has)} has it"
        message = f"line {line}: {where}: {generic} ({scope})" if line else f"{where}: {generic}"
        if fix:
            message += f"; fix: {fix}"
        pointer = f"{table}.{option}" if option else table
        out.append(Diagnostic("SP-2010", path, pointer, message))
    return out
