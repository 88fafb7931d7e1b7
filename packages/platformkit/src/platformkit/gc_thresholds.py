"""Garbage-collector settings for long-running servers.

CPython's default thresholds (700, 10, 10) collect the youngest generation every 700 new
container objects. A server holding large caches (every agent's state, credentials, artifacts)
then runs a full collection every few seconds, and each one walks the whole heap: on the 2-core
development machine, with 10,000 agents cached, strataplane's workers paused 180 to 450 ms at a
time, about 3 s in 40 s. A first generation of 20,000 objects makes those pauses rare (0.3 to
0.5 s in the same 40 s, none above 130 ms); objects freed by reference counting, which is nearly
all of a request's, are not affected. See docs/decisions/0008-server-gc-thresholds.md.
"""

from __future__ import annotations

import gc

__all__ = ["SERVING_THRESHOLDS", "tune_for_serving"]

SERVING_THRESHOLDS = (20_000, 10, 10)


def tune_for_serving() -> None:
    """Apply :data:`SERVING_THRESHOLDS` to this process (idempotent)."""
    gc.set_threshold(*SERVING_THRESHOLDS)
