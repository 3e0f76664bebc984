"""The short set's relevant memories that fusion leaves out of its top 5, where they rank, and
how much R@5 each would add (read off a ``bench.dialogue_eval`` result's top 10s).

    python bench/results/2026-11-26-quality/round12/short_misses.py RESULT.json
"""

from __future__ import annotations

import json
import sys
from collections import Counter

import bench.dialogue_eval as de
from bench.evalset import metrics

SHORT = ("recall", "situational")


def main() -> None:
    with open(sys.argv[1], encoding="utf-8") as f:
        res = json.load(f)
    gold = de.qrels("zh")
    qids = [q["qid"] for q in de.load_queries(styles=SHORT)]
    r5 = {
        m: sum(metrics(r["top10"][q], gold[q])["recall@5"] for q in qids) / len(qids)
        for m, r in res["modes"].items()
    }
    best = max(v for m, v in r5.items() if m in ("bm25", "vector", "rrf"))
    print(" ".join(f"{m} {v:.4f}" for m, v in r5.items()))
    print(f"fusion needs {best + 0.03 - r5['fusion']:+.4f} more for best + 0.03")
    where: Counter[str] = Counter()
    worth = []
    for q in qids:
        top10 = res["modes"]["fusion"]["top10"][q]
        for doc, rel in gold[q].items():
            if doc in top10[:5]:
                continue
            where[f"rel {rel}, " + ("rank 6-10" if doc in top10 else "below 10")] += 1
            worth.append(1 / len(gold[q]) / len(qids))
    print(f"{len(worth)} relevant memories missed: {dict(sorted(where.items()))}")
    median = sorted(worth)[len(worth) // 2]
    print(f"each would add {min(worth):.4f}–{max(worth):.4f} (median {median:.4f})")


if __name__ == "__main__":
    main()
