"""Several processes starting at once on a fresh data directory share one keyring file."""

from __future__ import annotations

import multiprocessing
from multiprocessing.synchronize import Barrier
from pathlib import Path

from platformkit.crypto import Keyring, load_or_create_keyring

PROCESSES = 4
ROUNDS = 25


def _worker(base: str, barrier: Barrier, results: multiprocessing.Queue[tuple[int, str]]) -> None:
    for n in range(ROUNDS):
        barrier.wait(timeout=120)  # every process reaches the fresh directory together
        try:
            ring = load_or_create_keyring(Path(base) / str(n) / "keyring.json")
            results.put((n, ring.active().fingerprint))
        except Exception as exc:  # reported to the test, which fails with it
            results.put((n, f"error: {exc!r}"))


def test_processes_starting_at_once_create_one_keyring_and_all_read_it(tmp_path: Path) -> None:
    ctx = multiprocessing.get_context("fork")
    barrier = ctx.Barrier(PROCESSES)
    results: multiprocessing.Queue[tuple[int, str]] = ctx.Queue()
    procs = [
        ctx.Process(target=_worker, args=(str(tmp_path), barrier, results))
        for _ in range(PROCESSES)
    ]
    for proc in procs:
        proc.start()
    seen: dict[int, set[str]] = {}
    for _ in range(PROCESSES * ROUNDS):
        n, fingerprint = results.get(timeout=120)
        seen.setdefault(n, set()).add(fingerprint)
    for proc in procs:
        proc.join(timeout=120)
        assert proc.exitcode == 0
    for n in range(ROUNDS):
        # one key, the one in the file: nobody failed, nobody kept a key of its own
        assert seen[n] == {Keyring.load(tmp_path / str(n) / "keyring.json").active().fingerprint}
    leftovers = [p.name for p in tmp_path.rglob(".keyring.json.*")]
    assert leftovers == []
