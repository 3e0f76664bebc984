#!/usr/bin/env bash
# The test command: lint and type-check, then every test (engine tests use the local node, started if needed,
# or KEMEM_TEST_ES_URL when set).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/python_env.sh  # .venv when setup.sh made one
if [[ -z "${KEMEM_TEST_MODEL_DIR:-}" && -d ../shared/models/m3e-small-onnx ]]; then
  export KEMEM_TEST_MODEL_DIR="$PWD/../shared/models/m3e-small-onnx"
fi
ruff check .
ruff format --check .
python3 -m mypy
python3 -m pytest -q "$@"
