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
echo "== pytest";              uv run --frozen pytest "$@"
