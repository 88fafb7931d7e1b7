"""Per-user runtime directory (sockets, lock files) that exists even where no login set it."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def ensure_runtime_dir() -> Path:
    """Return XDG_RUNTIME_DIR, creating a private one under the temp dir when it is unset."""
    current = os.environ.get("XDG_RUNTIME_DIR")
    if current and Path(current).is_dir():
        return Path(current)
    path = Path(tempfile.gettempdir()) / f"runtime-{os.getuid()}"
    path.mkdir(mode=0o700, exist_ok=True)
    os.environ["XDG_RUNTIME_DIR"] = str(path)
    return path
