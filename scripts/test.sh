#!/usr/bin/env bash
# Every check and test of the repository, in the order a failure is cheapest to find.
set -euo pipefail
cd "$(dirname "$0")/.."

echo "== ruff check";          uv run --frozen ruff check .
echo "== ruff format --check"; uv run --frozen ruff format --check .
echo "== mypy --strict";       uv run --frozen mypy --strict packages/*/src
echo "== pytest";              uv run --frozen pytest "$@"
