"""Compound questions on MemDaily pooled ("…是什么？另外，…是哪个？", 307 of the 600 sampled
queries): each question clause asked on its own and the top 10s interleaved, against the whole
question asked once (limit 10, threshold 0, as ``bench.memdaily`` asks).

    python bench/results/2026-11-26-quality/round12/clause_split.py --prefix bench-q6-md \
        --data ../shared/data/dev/memdaily
"""

from __future__ import annotations

import re
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from pooled_sample import open_sample

from bench.evalset import mean_metrics, metrics
from bench.memdaily import POOL, ask

MODES = ("fusion", "rrf", "vector", "bm25")


def question_clauses(text: str) -> list[str]:
    """The sentences that end in a question mark, when there are two or more."""
    sentences = [s for s in re.findall(r"[^。！？!?]*[。！？!?]?", text) if s.strip()]
    asked = [s for s in sentences if s.endswith(("？", "?"))]
    return asked if len(asked) >= 2 else []


def interleave(lists: list[list[str]], k: int = 10) -> list[str]:
    out: list[str] = []
    for i in range(k):
        for ids in lists:
            if i < len(ids) and ids[i] not in out:
                out.append(ids[i])
    return out[:k]


def main() -> None:
    es, km, pooled = open_sample()
    queries = [q for q in pooled if question_clauses(q["text"])]
    print(f"{len(queries)} compound questions of 600; R@1 / R@5 / R@10, whole → split")
    for mode in MODES:

        def top10(q: dict[str, Any], text: str, mode: str = mode) -> list[str]:
            resp = ask(km, q | {"text": text}, True, mode=mode, expand=True)
            return [h.index.removeprefix(POOL) for h in resp.memory_events]

        def both(q: dict[str, Any]) -> tuple[dict[str, float], dict[str, float]]:
            whole = top10(q, q["text"])
            split = interleave([top10(q, c) for c in question_clauses(q["text"])])
            return metrics(whole, es.qrels[q["qid"]]), metrics(split, es.qrels[q["qid"]])

        with ThreadPoolExecutor(2) as pool:
            rows = list(pool.map(both, queries))
        w, s = mean_metrics([r[0] for r in rows]), mean_metrics([r[1] for r in rows])
        keys = ("recall@1", "recall@5", "recall@10")
        cells = " / ".join(f"{w[k]:.3f} → {s[k]:.3f}" for k in keys)
        print(f"{mode:8s} {cells}")


if __name__ == "__main__":
    main()
