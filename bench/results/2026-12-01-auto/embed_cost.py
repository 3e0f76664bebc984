"""CPU a query's embedding costs with the shipped int8 file and the int8-channel file, one
thread, the same 300 MemDaily questions, the files in turn (3 rounds).

    python bench/results/2026-12-01-auto/embed_cost.py <memdaily dir>
"""

from __future__ import annotations

import gzip
import json
import statistics
import sys
import time
from pathlib import Path

from kemem_es.config import Settings
from kemem_es.embed import load_embedder


def questions(data: Path, n: int = 300) -> list[str]:
    """MemDaily's first ``n`` questions (queries.jsonl.gz: one JSON object a line, "text")."""
    with gzip.open(data / "queries.jsonl.gz", "rt", encoding="utf-8") as f:
        return [json.loads(line)["text"] for line, _ in zip(f, range(n), strict=False)]


def main(data: str) -> None:
    texts = questions(Path(data))
    models = {
        v: load_embedder(Settings(model_variant=v, embed_threads=1))
        for v in ("int8", "int8-channel")
    }
    for m in models.values():
        m.embed_query(texts[0])
    cpu: dict[str, list[float]] = {v: [] for v in models}
    for _ in range(3):
        for v, m in models.items():
            for t in texts:
                c0 = time.process_time()
                m.embed_query(t)
                cpu[v].append((time.process_time() - c0) * 1000)
    print(f"{len(texts)} questions x 3 rounds, one thread, CPU ms a query")
    for v, xs in cpu.items():
        q = statistics.quantiles(xs, n=100)
        print(
            f"{v:13s} median {statistics.median(xs):.2f}  p90 {q[89]:.2f}  "
            f"mean {statistics.mean(xs):.2f}"
        )


if __name__ == "__main__":
    main(sys.argv[1])
