"""Generate strataplane's Telegraf catalog bundle for one release from Telegraf's own sources.

    uv run python scripts/telegraf_catalog.py --repo /path/to/telegraf.git --tag v1.39.3 \
        --key /secure/catalog-signing.key --out packages/strataplane/src/strataplane/catalog/bundles

Reads the Go sources of the tag (``git show``, no work tree needed) and writes
``telegraf-<version>.json.zst`` with its detached Ed25519 signature ``.sig``. Only facts are
taken: plugin names per section, option names from the ``toml`` struct tags, their Go types
mapped to JSON Schema types, and the ``deprecated`` tags (since; removal; the option to use
instead). The options every plugin accepts are the general options Telegraf's configuration
loader ignores when it looks for unused fields (config/config.go, missingTomlField).

A new key: ``--new-key PATH`` writes a private key (mode 0600) and prints its public half, to
be added to ``catalog/trusted_keys.txt``.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import zstandard
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

SECTIONS = (
    "inputs",
    "outputs",
    "processors",
    "aggregators",
    "parsers",
    "serializers",
    "secretstores",
)
MODULE = "github.com/influxdata/telegraf/"

# Option types Telegraf's loader reads itself for every plugin of a section.
DURATION: dict[str, Any] = {"type": ["string", "integer", "number"], "x-go": "config.Duration"}
STRINGS: dict[str, Any] = {"type": "array", "items": {"type": "string"}}
GENERAL: dict[str, dict[str, Any]] = {
    "alias": {"type": "string"},
    "interval": DURATION,
    "precision": DURATION,
    "collection_jitter": DURATION,
    "collection_offset": DURATION,
    "flush_interval": DURATION,
    "flush_jitter": DURATION,
    "period": DURATION,
    "delay": DURATION,
    "grace": DURATION,
    "metric_batch_size": {"type": "integer"},
    "metric_buffer_limit": {"type": "integer"},
    "name_override": {"type": "string"},
    "name_prefix": {"type": "string"},
    "name_suffix": {"type": "string"},
    "namepass": STRINGS,
    "namedrop": STRINGS,
    "fieldpass": STRINGS,
    "fielddrop": STRINGS,
    "fieldinclude": STRINGS,
    "fieldexclude": STRINGS,
    "taginclude": STRINGS,
    "tagexclude": STRINGS,
    "tagpass": {"type": "object"},
    "tagdrop": {"type": "object"},
    "tags": {"type": "object", "additionalProperties": {"type": "string"}},
    "metricpass": {"type": "string"},
    "log_level": {"type": "string"},
    "startup_error_behavior": {"type": "string"},
    "drop_original": {"type": "boolean"},
    "order": {"type": "integer"},
}


def git(repo: str, *args: str) -> str:
    # git from PATH on a repository the maintainer names: a developer tool, not a server path
    return subprocess.run(  # noqa: S603
        ["git", "-C", repo, *args],  # noqa: S607
        check=True,
        capture_output=True,
        text=True,
    ).stdout


@dataclass
class GoField:
    name: str  # Go field name, or the embedded type
    gotype: str
    toml: str | None
    deprecated: str | None
    embedded: bool


@dataclass
class GoPackage:
    path: str
    imports: dict[str, str] = field(default_factory=dict)  # alias -> package dir
    structs: dict[str, list[GoField]] = field(default_factory=dict)
    source: str = ""


_IMPORT_BLOCK = re.compile(r"^import \((.*?)^\)", re.S | re.M)
_IMPORT_ONE = re.compile(r'^import\s+(\w+\s+)?"([^"]+)"', re.M)
_IMPORT_LINE = re.compile(r'^\s*(\w+\s+)?"([^"]+)"', re.M)
_STRUCT = re.compile(r"^type (\w+) struct \{\n(.*?)^\}", re.S | re.M)
_TAG = re.compile(r'(\w+):"([^"]*)"')


def _imports(text: str, into: dict[str, str]) -> None:
    blocks = [m.group(1) for m in _IMPORT_BLOCK.finditer(text)]
    pairs = [m.groups() for b in blocks for m in _IMPORT_LINE.finditer(b)]
    pairs += [m.groups() for m in _IMPORT_ONE.finditer(text)]
    for alias, path in pairs:
        if not path.startswith(MODULE):
            continue
        rel = path[len(MODULE) :]
        into[(alias or "").strip() or rel.rsplit("/", 1)[-1]] = rel


def _fields(body: str) -> list[GoField]:
    out: list[GoField] = []
    depth = 0
    for raw in body.splitlines():
        line = raw.split("//", 1)[0].rstrip()
        if not line.strip():
            continue
        if depth:
            depth += line.count("{") - line.count("}")
            continue
        tags = dict(_TAG.findall(line.split("`", 1)[1])) if "`" in line else {}
        decl = line.split("`", 1)[0].strip()
        if decl.endswith("{"):
            depth = 1
            decl = decl[:-1].strip()
        parts = decl.split(None, 1)
        if not parts:
            continue
        if len(parts) == 1 or parts[0].startswith("*"):
            out.append(
                GoField(
                    parts[0].lstrip("*"),
                    parts[0].lstrip("*"),
                    tags.get("toml"),
                    tags.get("deprecated"),
                    True,
                )
            )
            continue
        names, gotype = parts
        for name in (n.strip() for n in names.split(",")):
            out.append(
                GoField(name, gotype.strip(), tags.get("toml"), tags.get("deprecated"), False)
            )
    return out


class Source:
    def __init__(self, repo: str, tag: str) -> None:
        self.repo, self.tag = repo, tag
        self.files = [
            f
            for f in git(repo, "ls-tree", "-r", "--name-only", tag).splitlines()
            if f.endswith(".go") and not f.endswith("_test.go")
        ]
        self.packages: dict[str, GoPackage] = {}

    def package(self, path: str) -> GoPackage:
        found = self.packages.get(path)
        if found is not None:
            return found
        pkg = GoPackage(path)
        prefix = path + "/"
        for f in self.files:
            if f.startswith(prefix) and "/" not in f[len(prefix) :]:
                text = git(self.repo, "show", f"{self.tag}:{f}")
                pkg.source += text + "\n"
                _imports(text, pkg.imports)
                for m in _STRUCT.finditer(text):
                    pkg.structs[m.group(1)] = _fields(m.group(2))
        self.packages[path] = pkg
        return pkg

    def dirs(self, section: str) -> list[str]:
        root = f"plugins/{section}/"
        names = {f[len(root) :].split("/", 1)[0] for f in self.files if f.startswith(root)}
        return sorted(n for n in names if n not in {"all", "deprecations.go"} and "." not in n)


_ADD = re.compile(r'\b(\w+)\.(?:Add|AddStreaming)\(\s*(?:"([a-z0-9_]+)"|(\w+))\s*,')


def _types(pkg: GoPackage, section: str) -> dict[str, str | None]:
    """Registered plugin name -> the struct its creator returns (None when not found)."""
    found: dict[str, str | None] = {}
    for m in _ADD.finditer(pkg.source):
        if m.group(1) != section:
            continue
        plugin = m.group(2)
        if plugin is None:
            const = re.search(rf'\b{m.group(3)}\s*=\s*"([a-z0-9_]+)"', pkg.source)
            if const is None:
                continue
            plugin = const.group(1)
        body = pkg.source[m.end() : m.end() + 2000]
        ref = re.search(r"&(\w+)\s*\{", body)
        name = ref.group(1) if ref and ref.group(1) in pkg.structs else None
        if name is None:
            call = re.search(r"return (\w+)\(", body)
            if call:
                ret = re.search(rf"func {call.group(1)}\([^)]*\)\s*\*?(\w+)", pkg.source)
                if ret and ret.group(1) in pkg.structs:
                    name = ret.group(1)
        found[plugin] = name
    return found


_SCALARS: dict[str, dict[str, Any]] = {
    "string": {"type": "string"},
    "bool": {"type": "boolean"},
    "float32": {"type": "number"},
    "float64": {"type": "number"},
    "config.Duration": DURATION,
    "time.Duration": {"type": ["string", "integer"]},
    "config.Size": {"type": ["string", "integer"]},
    "config.Secret": {"type": "string"},
}
_INT = re.compile(r"^u?int(8|16|32|64)?$")


def json_type(gotype: str) -> dict[str, Any]:
    t = gotype.lstrip("*")
    if t in _SCALARS:
        return dict(_SCALARS[t])
    if _INT.match(t):
        return {"type": "integer"}
    if t.startswith("[]"):
        inner = json_type(t[2:])
        return {"type": "array", "items": inner} if inner else {"type": "array"}
    if t.startswith("map["):
        value = json_type(t.split("]", 1)[1])
        return {"type": "object", "additionalProperties": value} if value else {"type": "object"}
    return {}  # a struct or an interface: its own tables, not checked further here


def _version_tuple(v: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", v)[:3])


def options(
    src: Source, pkg: GoPackage, struct: str, seen: set[tuple[str, str]]
) -> tuple[dict[str, Any], bool]:
    """The options of a struct (embedded structs flattened); False when one could not be
    resolved, so the schema must stay open."""
    if (pkg.path, struct) in seen:
        return {}, True
    seen.add((pkg.path, struct))
    props: dict[str, Any] = {}
    closed = True
    for f in pkg.structs.get(struct, []):
        if f.embedded and (f.toml is None or f.toml == ""):
            target_pkg, name = pkg, f.gotype
            if "." in f.gotype:
                alias, name = f.gotype.split(".", 1)
                rel = pkg.imports.get(alias)
                if rel is None:
                    continue  # a type from outside Telegraf (sync.Mutex, net.Conn): no options
                target_pkg = src.package(rel)
            if name not in target_pkg.structs:
                closed = closed and not name[:1].isupper()
                continue
            inner, ok = options(src, target_pkg, name, seen)
            props.update(inner)
            closed = closed and ok
            continue
        key = f.toml.split(",", 1)[0] if f.toml is not None else None
        if key == "-" or not f.name[:1].isupper():
            continue
        if key is None or key == "":
            key = f.name.lower()
        schema = json_type(f.gotype)
        schema["x-go"] = f.gotype
        if f.deprecated:
            parts = f.deprecated.split(";")
            since = parts[0]
            removal = parts[1] if len(parts) > 2 else f"{_version_tuple(since)[0] + 1}.0.0"
            schema["deprecated"] = True
            schema["x-deprecated"] = {"since": since, "removal": removal, "notice": parts[-1]}
        props[key] = schema
    return props, closed


def accepts_format(pkg: GoPackage, setter: str) -> bool:
    return re.search(rf"\) {setter}\(", pkg.source) is not None


def plugin_schema(
    section: str, plugin: str, props: dict[str, Any], closed: bool, data_format: str | None
) -> dict[str, Any]:
    merged = (
        {**GENERAL, **props}
        if section not in ("parsers", "serializers", "secretstores")
        else dict(props)
    )
    if section == "secretstores":
        merged.setdefault("id", {"type": "string"})
    schema: dict[str, Any] = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": f"urn:telegraf:{section}:{plugin}",
        "title": f"{section}.{plugin}",
        "type": "object",
        "properties": dict(sorted(merged.items())),
        "additionalProperties": not closed,
    }
    if data_format is not None:
        # The plugin also takes data_format and the options of the parser or serializer it
        # names (Telegraf unmarshals the same table into both).
        schema["properties"]["data_format"] = {"type": "string"}
        schema["x-dataFormat"] = data_format
        schema["additionalProperties"] = True
    return schema


def build(repo: str, tag: str) -> dict[str, Any]:
    src = Source(repo, tag)
    version = tag.lstrip("v")
    plugins: dict[str, dict[str, Any]] = {}
    open_count = 0
    for section in SECTIONS:
        plugins[section] = {}
        for d in src.dirs(section):
            pkg = src.package(f"plugins/{section}/{d}")
            for name, struct in sorted(_types(pkg, section).items()):
                if struct is None:
                    props, closed = {}, False
                else:
                    props, closed = options(src, pkg, struct, set())
                data_format = None
                if section == "inputs" and (
                    accepts_format(pkg, "SetParser") or accepts_format(pkg, "SetParserFunc")
                ):
                    data_format = "parsers"
                if section == "outputs" and accepts_format(pkg, "SetSerializer"):
                    data_format = "serializers"
                open_count += not closed
                plugins[section][name] = plugin_schema(section, name, props, closed, data_format)
    commit = git(repo, "rev-list", "-n", "1", tag).strip()
    print(
        f"{tag}: {sum(map(len, plugins.values()))} plugins, {open_count} with open schemas",
        file=sys.stderr,
    )
    return {
        "format": 1,
        "agentKind": "telegraf",
        "version": version,
        "source": f"github.com/influxdata/telegraf {tag} ({commit})",
        "plugins": plugins,
    }


def canonical(bundle: dict[str, Any]) -> bytes:
    return json.dumps(bundle, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repo")
    ap.add_argument("--tag", action="append", default=[])
    ap.add_argument("--key", help="Ed25519 private key (PEM) that signs the bundles")
    ap.add_argument("--out", default="packages/strataplane/src/strataplane/catalog/bundles")
    ap.add_argument("--new-key", help="write a new private key here and print its public key")
    args = ap.parse_args()
    if args.new_key:
        key = Ed25519PrivateKey.generate()
        pem = key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
        fd = os.open(args.new_key, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as fh:
            fh.write(pem)
        raw = key.public_key().public_bytes(
            serialization.Encoding.Raw, serialization.PublicFormat.Raw
        )
        print(base64.b64encode(raw).decode())
        return
    if not (args.repo and args.tag and args.key):
        ap.error("--repo, --tag and --key are required")
    loaded = serialization.load_pem_private_key(Path(args.key).read_bytes(), password=None)
    assert isinstance(loaded, Ed25519PrivateKey)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for tag in args.tag:
        body = canonical(build(args.repo, tag))
        digest = hashlib.sha256(body).digest()
        name = f"telegraf-{tag.lstrip('v')}.json"
        (out / f"{name}.zst").write_bytes(zstandard.ZstdCompressor(level=19).compress(body))
        (out / f"{name}.sig").write_text(base64.b64encode(loaded.sign(digest)).decode() + "\n")
        print(f"{name}: {len(body)} bytes, sha256 {digest.hex()}", file=sys.stderr)


if __name__ == "__main__":
    main()
