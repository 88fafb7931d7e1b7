"""``agentbus install <harness>`` and ``agentbus uninstall <harness>``: register the agent if it
is not yet (with the harness's name), then put (or take out) our entries in each of the
harness's files. A file is written only when its content changes, through a temporary file and
a rename; each file's outcome is reported: created, updated, unchanged, removed (the file held
nothing else), or absent."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import MutableMapping
from dataclasses import dataclass
from pathlib import Path
from shutil import which
from typing import Any

import tomlkit

from agentbus_sidecar.actions.setup import register_agent
from agentbus_sidecar.adapters.edits import apply_install, apply_uninstall
from agentbus_sidecar.adapters.harnesses import ConfigFile, ServerCommand, harness_named
from agentbus_sidecar.adapters.opencode_plugin import MARKER
from agentbus_sidecar.credentials import load_credentials
from agentbus_sidecar.errors import ConfigError

__all__ = ["FileChange", "agentbus_executable", "install", "uninstall"]


@dataclass(frozen=True)
class FileChange:
    path: Path
    outcome: str  # created, updated, unchanged, removed, absent
    entries: list[str]

    def as_dict(self) -> dict[str, Any]:
        return {"path": str(self.path), "outcome": self.outcome, "entries": self.entries}


def agentbus_executable() -> str:
    """This installation's ``agentbus``: beside the interpreter (a venv), else on PATH."""
    beside = Path(sys.executable).parent / "agentbus"
    if beside.exists():
        return str(beside)
    found = which("agentbus")
    if found is None:
        raise ConfigError("cannot find the agentbus executable to put in the harness's config")
    return str(Path(found).resolve())


def _load(path: Path, fmt: str) -> MutableMapping[str, Any] | None:
    if not path.exists():
        return None
    text = path.read_text()
    try:
        if fmt == "toml":
            return tomlkit.parse(text)
        doc = json.loads(text) if text.strip() else {}
    except ValueError as exc:
        raise ConfigError(
            f"{path} is not valid {fmt.upper()} ({exc}); nothing was changed"
        ) from exc
    if not isinstance(doc, dict):
        raise ConfigError(f"{path} does not hold an object; nothing was changed")
    return doc


def _dump(doc: MutableMapping[str, Any], fmt: str) -> str:
    if fmt == "toml":  # a table taken out leaves its blank line behind
        return tomlkit.dumps(doc).rstrip("\n") + "\n"
    return json.dumps(doc, indent=2) + "\n"


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.agentbus-tmp")
    temporary.write_text(text)
    if path.exists():
        os.chmod(temporary, path.stat().st_mode & 0o777)
    os.replace(temporary, path)


def _entries(config: ConfigFile) -> list[str]:
    return [".".join(edit.path) for edit in config.edits]


def _install_text(config: ConfigFile) -> FileChange:
    assert config.content is not None
    old = config.path.read_text() if config.path.exists() else None
    if old == config.content:
        return FileChange(config.path, "unchanged", [config.path.name])
    _write(config.path, config.content)
    return FileChange(config.path, "created" if old is None else "updated", [config.path.name])


def _uninstall_text(config: ConfigFile) -> FileChange:
    if not config.path.exists():
        return FileChange(config.path, "absent", [])
    if MARKER not in config.path.read_text():  # not ours (any more): left alone
        return FileChange(config.path, "unchanged", [])
    config.path.unlink()
    return FileChange(config.path, "removed", [config.path.name])


def _install_file(config: ConfigFile) -> FileChange:
    if config.fmt == "text":
        return _install_text(config)
    before = _load(config.path, config.fmt)
    doc: MutableMapping[str, Any] = (
        before if before is not None else (tomlkit.document() if config.fmt == "toml" else {})
    )
    old = _dump(doc, config.fmt) if before is not None else None
    apply_install(doc, config.edits)
    new = _dump(doc, config.fmt)
    if new == old:
        return FileChange(config.path, "unchanged", _entries(config))
    _write(config.path, new)
    return FileChange(config.path, "created" if old is None else "updated", _entries(config))


def _uninstall_file(config: ConfigFile) -> FileChange:
    if config.fmt == "text":
        return _uninstall_text(config)
    doc = _load(config.path, config.fmt)
    if doc is None:
        return FileChange(config.path, "absent", [])
    old = _dump(doc, config.fmt)
    apply_uninstall(doc, config.edits)
    if _dump(doc, config.fmt) == old:
        return FileChange(config.path, "unchanged", [])
    if len(doc) == 0:
        config.path.unlink()
        return FileChange(config.path, "removed", _entries(config))
    _write(config.path, _dump(doc, config.fmt))
    return FileChange(config.path, "updated", _entries(config))


def _configs(
    harness: str,
    credentials: Path,
    state_dir: Path | None,
    project: Path | None,
    wait_s: int,
) -> list[ConfigFile]:
    command = ServerCommand(
        agentbus_executable(),
        credentials.resolve(),
        state_dir.resolve() if state_dir is not None else None,
    )
    home = Path.home()
    return harness_named(harness).files(
        command, project.resolve() if project else None, home, wait_s
    )


async def install(
    harness: str,
    credentials: Path,
    state_dir: Path | None,
    *,
    project: Path | None,
    wait_s: int,
) -> tuple[list[FileChange], str | None]:
    """The files changed, and the agent id when this install registered the agent."""
    configs = _configs(harness, credentials, state_dir, project, wait_s)
    creds = load_credentials(credentials)
    registered = None
    if not creds.agent_id:
        answer = await register_agent(
            credentials, state_dir, {"harness": harness_named(harness).registered_as}
        )
        registered = str((answer.get("agent") or {}).get("id"))
    return [_install_file(config) for config in configs], registered


def uninstall(
    harness: str, credentials: Path, state_dir: Path | None, *, project: Path | None
) -> list[FileChange]:
    configs = _configs(harness, credentials, state_dir, project, 0)
    return [_uninstall_file(config) for config in configs]
