"""Round 15: how much the pooled MemDaily test could lose to questions asked twice.

In the pooled test every simulated user of a source file shares one scope. When two users'
trajectories ask the same question word for word, any ranker that reads only the question
returns one list for both, and the two golds share its top 5. This is the best R@5 any such
ranker could reach if that were the only limit (a greedy cover of each group's golds with 5
slots; also with the question's particles and punctuation removed).

    python bench/results/2026-11-26-quality/round15/pooled_same_question.py DATA
    (DATA: the MemDaily folder, ../shared/data/dev/memdaily)
"""

from __future__ import annotations

import gzip
import json
import re
import sys
from collections import Counter, defaultdict
from pathlib import Path


def source(namespace: str) -> str:
    return namespace.split(":")[0]


def plain(text: str) -> str:
    return re.sub(r"[，。？！、\s]|来着|呀|啊|呢|吗|啦|的", "", text)


def best_cover(golds: list[dict[str, int]], slots: int = 5) -> float:
    """Σ over the group's questions of R@5 for one shared list, greedily chosen."""
    chosen: set[str] = set()
    for _ in range(slots):
        gain = Counter()
        for g in golds:
            for d in set(g) - chosen:
                gain[d] += 1 / len(g)
        if not gain:
            break
        chosen.add(gain.most_common(1)[0][0])
    return sum(len(set(g) & chosen) / len(g) for g in golds)


def main() -> None:
    data = Path(sys.argv[1])
    with gzip.open(data / "queries.jsonl.gz", "rt") as f:
        queries = [json.loads(line) for line in f]
    qrels: dict[str, dict[str, int]] = defaultdict(dict)
    with gzip.open(data / "qrels.tsv.gz", "rt") as f:
        for line in f:
            qid, doc, rel = line.split()[:3]
            if rel.isdigit():
                qrels[qid][doc] = int(rel)
    for name, key in (("word for word", lambda t: t), ("without particles", plain)):
        groups: dict[tuple[str, str], list[dict[str, int]]] = defaultdict(list)
        for q in queries:
            groups[(source(q["namespace"]), key(q["text"]))].append(qrels[q["qid"]])
        shared = sum(len(g) for g in groups.values() if len(g) > 1)
        bound = sum(best_cover(g) for g in groups.values()) / len(queries)
        print(
            f"{name}: {shared} of {len(queries)} questions asked in another trajectory too; "
            f"R@5 bound {bound:.4f}"
        )


if __name__ == "__main__":
    main()
