"""The brain's own secrets, created on first run in a 0600 file under the config dir.

One random master key; every purpose gets its own key derived from it with HMAC under a label,
so a key for one purpose can never be used for another.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import secrets
import uuid
from dataclasses import dataclass, field
from pathlib import Path

FILE_NAME = "secrets.json"


@dataclass(frozen=True)
class BrainSecrets:
    master: bytes = field(repr=False)

    def derive(self, label: str) -> bytes:
        return hmac.new(self.master, b"z4j:" + label.encode(), hashlib.sha256).digest()

    @property
    def token_key(self) -> bytes:
        """Key of the HMAC-SHA256 under which agent and invitation tokens are stored."""
        return self.derive("token-hash")

    @property
    def audit_key(self) -> bytes:
        return self.derive("audit-chain")

    def project_secret(self, project_id: uuid.UUID) -> bytes:
        """The per-project HMAC secret agents sign frames with; derived, so nothing is stored."""
        return hmac.new(self.derive("project-secret"), project_id.bytes, hashlib.sha256).digest()


def load_or_create(config_dir: Path) -> tuple[BrainSecrets, bool]:
    """Return the secrets and whether they were created just now."""
    path = config_dir / FILE_NAME
    if path.exists():
        mode = path.stat().st_mode & 0o777
        if mode & 0o077:
            raise PermissionError(f"{path} is readable by others (mode {mode:o}); chmod 600 it")
        data = json.loads(path.read_text())
        return BrainSecrets(base64.b64decode(data["master"])), False
    config_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    master = secrets.token_bytes(32)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as fh:
        json.dump({"version": 1, "master": base64.b64encode(master).decode()}, fh)
    return BrainSecrets(master), True
