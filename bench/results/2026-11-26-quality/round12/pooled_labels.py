"""What MemDaily pooled can tell apart: every mode's top 10 on the pooled sample (600 queries,
seed 1, as ``bench.memdaily`` asks them), then

- the share of gold links whose exact text occurs more than once in the pool (other simulated
  users said the same sentence),
- R@5 counted on texts (a hit counts when its text equals a gold text),
- the share of top-10 hits dated after the query (another user's later message),
- days from a gold message to its question (the whole set), and the share of each mode's
  non-gold top-10 hits dated on the question's day or later.

    python bench/results/2026-11-26-quality/round12/pooled_labels.py --prefix bench-q6-md \
        --data ../shared/data/dev/memdaily
"""

from __future__ import annotations

from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from datetime import date

from pooled_sample import open_sample

from bench.evalset import metrics, source_file
from bench.memdaily import POOL, ask

MODES = ("fusion", "rrf", "vector", "bm25")


def day(stamp: str) -> date:
    return date.fromisoformat(stamp[:10])


def main() -> None:
    es, km, pooled = open_sample()
    docs = {d["doc_id"]: d for d in es.docs}
    queries = pooled
    copies = Counter((source_file(d["namespace"]), d["text"]) for d in es.docs)
    links = [(q, g) for q in queries for g in es.qrels[q["qid"]]]
    shared = sum(copies[(source_file(q["namespace"]), docs[g]["text"])] > 1 for q, g in links)
    print(f"{len(queries)} queries, {len(links)} gold links")
    print(f"gold links whose text occurs more than once in the pool: {shared / len(links):.3f}")
    after = sum(docs[g]["timestamp"] > q["timestamp"] for q, g in links)
    print(f"gold links dated after their query: {after}")
    gaps = Counter(
        (day(q["timestamp"]) - day(docs[g]["timestamp"])).days
        for q in es.queries
        for g in es.qrels[q["qid"]]
    )
    total = sum(gaps.values())
    print(f"days from gold message to question, all {total} links: {dict(sorted(gaps.items()))}")
    mid = sum(gaps[k] for k in (2, 3, 4)) / total
    print(f"  2–4 days: {mid:.3f}, same day: {gaps[0] / total:.3f}")
    print("mode       R@5  R@5 on texts  top 10 after the query  non-gold on its day or later")
    for mode in MODES:

        def top10(q: dict, mode: str = mode) -> list[str]:
            resp = ask(km, q, True, mode=mode, expand=True)
            return [h.index.removeprefix(POOL) for h in resp.memory_events]

        with ThreadPoolExecutor(2) as pool:
            tops = list(pool.map(top10, queries))
        r5 = text_r5 = later = hits = recent = others = 0.0
        for q, ids in zip(queries, tops, strict=True):
            gold = es.qrels[q["qid"]]
            r5 += metrics(ids, gold)["recall@5"]
            texts = {docs[g]["text"] for g in gold}
            text_r5 += len(texts & {docs[i]["text"] for i in ids[:5]}) / len(texts)
            later += sum(docs[i]["timestamp"] > q["timestamp"] for i in ids)
            hits += len(ids)
            other = [i for i in ids if i not in gold]
            recent += sum(day(docs[i]["timestamp"]) >= day(q["timestamp"]) for i in other)
            others += len(other)
        n = len(queries)
        print(
            f"{mode:8s} {r5 / n:6.4f} {text_r5 / n:13.4f} {later / hits:23.3f} "
            f"{recent / others:29.3f}"
        )


if __name__ == "__main__":
    main()
