#!/usr/bin/env bash
# Every check and test of the repository, in the order a failure is cheapest to find.
set -euo pipefail
cd "$(dirname "$0")/.."

echo "== ruff check";          uv run --frozen ruff check .
echo "== ruff format --check"; uv run --frozen ruff format --check .
echo "== mypy --strict";       uv run --frozen mypy --strict packages/*/src
# The tests start Python processes by the hundred (gateways, brains, Celery workers, CLIs).
# Where the environment sets PYTHONDONTWRITEBYTECODE, each would compile every module it
# imports from source at every start, seconds for a server; compile them all once instead.
echo "== bytecode";            uv sync --frozen --quiet --compile-bytecode
                               uv run --frozen python -m compileall -q packages
# Two test processes, a test file to each at a time (pytest-xdist): most of a test's time is
# spent waiting on the servers it started, so two files at once take about half the time.
# Modules that take minutes are marked long_module and run first, so that neither process is
# left alone with one at the end (platformkit.testing.plugin). The slowest tests are listed at
# the end of the run. Pass -n 0 to run in one process.
echo "== pytest";              uv run --frozen pytest -n 2 --dist loadfile --durations=25 "$@"
