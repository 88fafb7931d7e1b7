"""The plugin catalog as shipped and as served: the signed bundles in ``bundles/`` (generated
by scripts/telegraf_catalog.py from Telegraf's sources), the keys trusted to sign them, and the
process's cache of imported bundles (``service.CATALOG``)."""

from __future__ import annotations

import base64
from importlib import resources
from pathlib import Path

__all__ = ["shipped_bundles", "trusted_keys"]


def trusted_keys(extra: str = "") -> list[bytes]:
    """The shipped public keys plus ``extra`` (comma-separated base64)."""
    text = resources.files(__package__).joinpath("trusted_keys.txt").read_text(encoding="utf-8")
    names = [line.split()[0] for line in text.splitlines() if line.strip() and line[0] != "#"]
    names += [k.strip() for k in extra.split(",") if k.strip()]
    keys = []
    for name in names:
        raw = base64.b64decode(name)
        if len(raw) == 32:
            keys.append(raw)
    return keys


def shipped_bundles() -> list[tuple[Path, Path]]:
    """(compressed bundle, signature) of every bundle the package ships."""
    root = Path(str(resources.files(__package__).joinpath("bundles")))
    return [
        (p, p.with_suffix("").with_suffix(".json.sig")) for p in sorted(root.glob("*.json.zst"))
    ]
