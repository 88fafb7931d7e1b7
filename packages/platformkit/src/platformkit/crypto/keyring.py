"""The deployment keyring: a JSON file of AES-256 key-encryption keys, one of them active.

File layout (mode 0600, owner-only)::

    {"format": "platformkit-keyring/v1",
     "active": 2,
     "keys": [{"id": 1, "key": "<base64 of 32 bytes>", "created_at": "<ISO 8601 UTC>"},
              {"id": 2, "key": "...", "created_at": "..."}]}

New data keys are wrapped under the active key; older keys stay so that data keys wrapped
under them still unwrap. Key material never appears in ``repr``/``str``; keys are named by id
and by ``fingerprint`` (the first 16 hex characters of the key's SHA-256).
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import secrets
import stat
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.ciphers.aead import AESGCM

__all__ = [
    "FORMAT",
    "DeploymentKey",
    "Keyring",
    "KeyringError",
    "generate_keyring",
    "load_or_create_keyring",
]

FORMAT = "platformkit-keyring/v1"
KEY_SIZE = 32


class KeyringError(Exception):
    """The keyring file is missing, malformed, too widely readable, or lacks a key id."""

    code = "keyring.invalid"  # what a command line prints (wirekit.clierrors)


class DeploymentKey:
    """One key-encryption key. Holds the material without ever printing it."""

    __slots__ = ("_aead", "_material", "created_at", "fingerprint", "id")

    def __init__(self, key_id: int, material: bytes, created_at: str) -> None:
        if len(material) != KEY_SIZE:
            raise KeyringError(f"key {key_id} is not {KEY_SIZE} bytes")
        self.id = key_id
        self.created_at = created_at
        self.fingerprint = hashlib.sha256(material).hexdigest()[:16]
        self._material = material
        self._aead = AESGCM(material)

    def __repr__(self) -> str:
        return f"DeploymentKey(id={self.id}, fingerprint={self.fingerprint})"

    __str__ = __repr__

    def aead(self) -> AESGCM:
        """AES-256-GCM under this key (the material itself is not handed out)."""
        return self._aead


class Keyring:
    """Deployment keys loaded from (and saved to) ``path``; ``path=None`` keeps them in memory."""

    def __init__(self, keys: list[DeploymentKey], active_id: int, path: Path | None = None):
        self._keys = {k.id: k for k in keys}
        if len(self._keys) != len(keys) or active_id not in self._keys:
            raise KeyringError("key ids must be unique and the active id must exist")
        self.active_id = active_id
        self.path = path

    def __repr__(self) -> str:
        keys = ", ".join(f"{k.id}:{k.fingerprint}" for k in self._keys.values())
        return f"Keyring(path={self.path}, active={self.active_id}, keys=[{keys}])"

    __str__ = __repr__

    @classmethod
    def in_memory(cls) -> Keyring:
        """A one-key keyring that is never written anywhere (tests, throwaway tools)."""
        return cls([_new_key(1)], 1)

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> Keyring:
        """Read a keyring file, refusing it if group or others have any access."""
        path = Path(path)
        try:
            fd = os.open(path, os.O_RDONLY)
        except FileNotFoundError as exc:
            raise KeyringError(f"no keyring at {path}") from exc
        with os.fdopen(fd, "rb") as fh:
            # fstat on the open descriptor: the file checked is the file read.
            mode = stat.S_IMODE(os.fstat(fh.fileno()).st_mode)
            if mode & 0o077:
                raise KeyringError(f"{path} has mode {mode:04o}; run: chmod 600 {path}")
            raw = fh.read()
        try:
            doc = json.loads(raw)
            if doc["format"] != FORMAT:
                raise KeyringError(f"{path}: unknown format {doc['format']!r}")
            keys = [
                DeploymentKey(
                    int(k["id"]), base64.b64decode(k["key"], validate=True), k["created_at"]
                )
                for k in doc["keys"]
            ]
            return cls(keys, int(doc["active"]), path)
        except (ValueError, KeyError, TypeError) as exc:
            raise KeyringError(f"{path} is not a valid keyring") from exc

    @property
    def ids(self) -> list[int]:
        return sorted(self._keys)

    def active(self) -> DeploymentKey:
        return self._keys[self.active_id]

    def get(self, key_id: int) -> DeploymentKey:
        try:
            return self._keys[key_id]
        except KeyError:
            raise KeyringError(f"keyring has no key {key_id}") from None

    def add_key(self) -> DeploymentKey:
        """Rotate: add a new key, make it active, keep the old ones, and save the file."""
        key = _new_key(max(self._keys) + 1)
        self._keys[key.id] = key
        previous, self.active_id = self.active_id, key.id
        if self.path is not None:
            try:
                _write(self.path, self._document(), replace=True)
            except OSError:
                del self._keys[key.id]
                self.active_id = previous
                raise
        return key

    def _document(self) -> dict[str, Any]:
        keys = [
            {"id": k.id, "key": base64.b64encode(k._material).decode(), "created_at": k.created_at}
            for k in self._keys.values()
        ]
        return {"format": FORMAT, "active": self.active_id, "keys": keys}


def _new_key(key_id: int) -> DeploymentKey:
    now = datetime.now(UTC).isoformat(timespec="seconds")
    return DeploymentKey(key_id, secrets.token_bytes(KEY_SIZE), now)


def _write(path: Path, doc: dict[str, Any], *, replace: bool) -> None:
    """Write the keyring file whole: into a fresh 0600 temporary file in the same directory,
    then ``os.replace`` (rotation) or ``os.link`` (creation) onto ``path``.

    Linking fails with FileExistsError when ``path`` exists, so creation never overwrites a
    keyring, and a reader never sees a created file before all of its content is there (an
    ``O_EXCL`` open of ``path`` itself would show a concurrent reader an empty file).
    """
    data = json.dumps(doc, indent=2).encode()
    # mkstemp creates the file 0600 with O_EXCL under a fresh name in the same directory.
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            os.fchmod(fh.fileno(), 0o600)  # the umask may have left fewer bits; be exact
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        if replace:
            os.replace(tmp, path)
        else:
            os.link(tmp, path)
    finally:
        Path(tmp).unlink(missing_ok=True)
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)  # make the new directory entry durable too
    finally:
        os.close(dir_fd)


def generate_keyring(path: str | os.PathLike[str]) -> Keyring:
    """Create a new keyring file with one active key; refuses to overwrite an existing file."""
    keyring = Keyring([_new_key(1)], 1, Path(path))
    _write(Path(path), keyring._document(), replace=False)
    return keyring


def load_or_create_keyring(path: str | os.PathLike[str]) -> Keyring:
    """The keyring at ``path``, or a new one (0600, in a 0700 directory) when there is none.

    Safe when several processes start at once on a fresh directory: exactly one creates the
    file, atomically and whole; every other one reads what that one wrote.
    """
    path = Path(path)
    try:
        return Keyring.load(path)
    except KeyringError:
        if path.exists():  # a bad file, or one another process linked in since: read it again
            return Keyring.load(path)
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    try:
        return generate_keyring(path)
    except FileExistsError:
        return Keyring.load(path)  # another process created it first: use its keys
