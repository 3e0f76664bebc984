"""How close each int8 file's vectors are to fp32's, and what a run costs (one thread).

python bench/results/2026-11-30-channel/closeness.py > closeness.txt
(KEMEM_TEST_MODEL_DIR or ../shared/models/m3e-small-onnx; the int8-channel file is derived into
KEMEM_MODEL_CACHE_DIR as the package does.) Texts: MemDaily's first 300 queries and memories.
"""

from __future__ import annotations

import gzip
import json
import os
import time
from pathlib import Path

import numpy as np

from kemem_es.embed import Embedder

REPO = Path(__file__).resolve().parents[3]
MODEL = Path(os.environ.get("KEMEM_TEST_MODEL_DIR") or REPO.parent / "shared/models/m3e-small-onnx")
DATA = REPO.parent / "shared/data/dev/memdaily"


def texts(name: str, n: int = 300) -> list[str]:
    with gzip.open(DATA / name, "rt") as fh:
        rows = [json.loads(line) for line, _ in zip(fh, range(n), strict=False)]
    return [r["text"] for r in rows]


def main() -> None:
    queries, memories = texts("queries.jsonl.gz"), texts("corpus.jsonl.gz")
    models = {v: Embedder(MODEL, v, threads=1) for v in ("fp32", "int8", "int8-channel")}
    vecs = {v: m.embed(queries + memories) for v, m in models.items()}
    ref = vecs["fp32"]
    ref_sim = ref[:300] @ ref[300:].T
    for v, x in vecs.items():
        cos = (x * ref).sum(axis=1)
        err = np.abs(x[:300] @ x[300:].T - ref_sim).mean()
        print(
            f"{v:13s} cosine to fp32 mean {cos.mean():.5f} min {cos.min():.5f}; "
            f"query-memory cosine error mean {err:.5f}"
        )
    for label, sample in (("query", queries[:100]), ("memory", memories[:100])):
        for v, m in models.items():
            for t in sample[:10]:
                m.embed_one(t)
            c0, w0 = time.process_time(), time.perf_counter()
            for t in sample:
                m.embed_one(t)
            cpu = (time.process_time() - c0) / len(sample) * 1000
            wall = (time.perf_counter() - w0) / len(sample) * 1000
            print(f"{label:6s} {v:13s} {wall:.2f} ms wall, {cpu:.2f} ms CPU a text")


if __name__ == "__main__":
    main()
