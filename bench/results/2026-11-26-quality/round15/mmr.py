"""Round 15: diversity in the top 10 (maximal marginal relevance), offline over fusion's own
top 50. Each next pick maximises ``score − λ·max sim(pick, already picked)`` (sim: the cosine
on fusion's own vector scale, 0 for unrelated text, 1 for a near-copy), so a near-copy of a
memory already chosen gives way to a memory about something else. Fusion's top 50 come
from the engine (the package's query, as each harness asks it); memory vectors from the store.

    python bench/results/2026-11-26-quality/round15/mmr.py memdaily PREFIX   # pooled sample
    python bench/results/2026-11-26-quality/round15/mmr.py dialogue PREFIX CORPUS
"""

from __future__ import annotations

import sys
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from typing import Any

import numpy as np
from opensearchpy import OpenSearch

from bench.common import make_kemem
from bench.evalset import mean_metrics, metrics

URL = "http://127.0.0.1:9261"
LAMBDAS = (0.0, 0.05, 0.1, 0.2, 0.3, 0.5)


def store_vectors(prefix: str) -> dict[str, np.ndarray]:
    """Every memory's vector, paged with search_after (a scroll would break a 3.5 index that
    derives its vectors; see the README)."""
    es = OpenSearch(URL, timeout=300)
    out = {}
    for db in ("user", "official"):
        after = None
        while True:
            body = {"size": 2000, "sort": [{"uid": "asc"}], "_source": ["id", "vector"]}
            if after:
                body["search_after"] = after
            hits = es.search(index=f"{prefix}-{db}-events", body=body)["hits"]["hits"]
            if not hits:
                break
            for h in hits:
                out[str(h["_source"].get("id", h["_id"]))] = np.asarray(
                    h["_source"]["vector"], "f4"
                )
            after = hits[-1]["sort"]
    return out


def mmr(ids: list[str], scores: list[float], V: dict[str, np.ndarray], lam: float) -> list[str]:
    if lam == 0:
        return ids[:10]
    left = list(range(len(ids)))
    M = np.stack([V[i] for i in ids])
    picked: list[int] = []
    while left and len(picked) < 10:
        if picked:
            sim = np.clip(((M[left] @ M[picked].T).max(axis=1) - 0.595) / 0.18, 0, 1)
        else:
            sim = np.zeros(len(left))
        best = left[int(np.argmax(np.asarray([scores[i] for i in left]) - lam * sim))]
        picked.append(best)
        left.remove(best)
    return [ids[i] for i in picked]


def main() -> None:
    what, prefix = sys.argv[1], sys.argv[2]
    km = make_kemem(prefix)
    V = store_vectors(prefix)
    if what == "memdaily":
        from bench.evalset import EvalSet, source_file
        from bench.memdaily import AGENT, POOL, sample

        es = EvalSet.load("/work/shared/data/dev/memdaily")
        qs = sample(list(es.queries), 600, seed=1)

        def ask(q: dict[str, Any]) -> tuple[list[str], list[float], dict[str, int], str]:
            r = km.query(
                q["text"],
                user_id=POOL + source_file(q["namespace"]),
                agent_id=AGENT,
                limit=50,
                score_threshold=0.0,
                entity_limit=0,
                now=datetime.fromisoformat(q["timestamp"]),
            )
            return (
                [h.index for h in r.memory_events],
                [h.score for h in r.memory_events],
                {POOL + k: v for k, v in es.qrels[q["qid"]].items()},
                "pooled",
            )
    else:
        from bench.dialogue_eval import ask as dask
        from bench.dialogue_eval import load_queries, qrels

        corpus = sys.argv[3]
        gold = qrels(corpus)
        qs = load_queries(corpus=corpus)

        def ask(q: dict[str, Any]) -> tuple[list[str], list[float], dict[str, int], str]:
            r = dask(km, q, limit=50)
            return (
                [h.index for h in r.memory_events],
                [h.score for h in r.memory_events],
                gold[q["qid"]],
                q["style"],
            )

    with ThreadPoolExecutor(2) as pool:
        rows = list(pool.map(ask, qs))
    for lam in LAMBDAS:
        by: dict[str, list] = {"all": []}
        for ids, scores, g, style in rows:
            m = metrics(mmr(ids, scores, V, lam), g)
            by["all"].append(m)
            by.setdefault(style, []).append(m)
        print(
            f"lambda {lam}",
            {k: round(mean_metrics(v)["recall@5"], 4) for k, v in by.items()},
            flush=True,
        )


if __name__ == "__main__":
    main()
