"""Round 10, anchor feedback (not adopted): dump each query's fused top 50 and the memories'
vectors, for ``anchor_eval.py``.

    KEMEM_ES_URL=http://127.0.0.1:9261 KEMEM_MODEL_DIR=../shared/models/m3e-small-onnx \\
        python bench/results/2026-11-26-quality/round10/anchor_dump.py zh|md

``zh``: the Chinese dialogue dev set on the store ``bench-q6-zh`` (``bench.dialogue_eval --keep``);
``md``: MemDaily per user (800 queries, seed 0) and pooled (600, seed 1) on ``bench-q6-md``
(``bench.memdaily --keep``). Output: ``bench/work/r10/anchor_{zh,md}.pkl``.
"""

from __future__ import annotations

import pickle
import sys
import zlib
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from typing import Any

import numpy as np
from opensearchpy import OpenSearch

from bench import dialogue_eval as de
from bench import memdaily as md
from bench.common import WORK, make_kemem
from bench.evalset import EvalSet, source_file

LIMIT = 50
CLIENT = OpenSearch("http://127.0.0.1:9261", timeout=120)
SORT = [{"user_id": "asc"}, {"id": "asc"}]


def vectors(index: str) -> dict[str, np.ndarray]:
    """Every memory's vector, paged with search_after: a *scroll* that fetches the vector (a
    derived source on OpenSearch 3.5) leaves the index unable to fetch it again until reopened
    (k-NN issue 3191 / 3458; seen here)."""
    out: dict[str, np.ndarray] = {}
    body: dict[str, Any] = {"size": 1000, "_source": ["id", "vector"], "sort": SORT}
    while hits := CLIENT.search(index=index, body=body)["hits"]["hits"]:
        for h in hits:
            key = h["_source"]["id"].removeprefix(md.POOL)
            out.setdefault(key, np.asarray(h["_source"]["vector"]))
        body["search_after"] = hits[-1]["sort"]
    return out


def half(qid: str) -> str:
    return "a" if zlib.crc32(qid.encode()) % 2 else "b"


def zh() -> tuple[list[dict[str, Any]], dict[str, np.ndarray]]:
    km, gold, qs = make_kemem("bench-q6-zh"), de.qrels("zh"), de.load_queries(corpus="zh")

    def one(q: dict[str, Any]) -> list[tuple[str, float]]:
        text, context = de.query_text(q)
        now = datetime.fromisoformat(q["now"])
        r = km.query(
            text, user_id=q["user_id"], agent_id=q["agent_id"], context=context, limit=LIMIT,
            score_threshold=0.0, now=now,
        )  # fmt: skip
        return [(h.index, h.score) for h in r.memory_events]

    with ThreadPoolExecutor(2) as pool:
        hits = list(pool.map(one, qs))
    rows = [
        {
            "set": "long" if q["style"] == "long" else "short",
            "half": "a" if int(q["qid"].rsplit("-", 1)[1]) % 2 else "b",
            "gold": gold[q["qid"]],
            "hits": h,
        }
        for q, h in zip(qs, hits, strict=True)
    ]
    return rows, vectors("bench-q6-zh-user-events-v2") | vectors("bench-q6-zh-official-events-v2")


def memdaily() -> tuple[list[dict[str, Any]], dict[str, np.ndarray]]:
    km, es = make_kemem("bench-q6-md"), EvalSet.load("../shared/data/dev/memdaily")
    rows: list[dict[str, Any]] = []
    for pooled, qs in ((False, md.sample(es.queries, 800)), (True, md.sample(es.queries, 600, 1))):

        def one(q: dict[str, Any], pooled: bool = pooled) -> list[tuple[str, float]]:
            user = md.POOL + source_file(q["namespace"]) if pooled else q["namespace"]
            now = datetime.fromisoformat(q["timestamp"])
            r = km.query(
                q["text"], user_id=user, agent_id=md.AGENT, limit=LIMIT, score_threshold=0.0,
                now=now, entity_limit=0,
            )  # fmt: skip
            return [(h.index.removeprefix(md.POOL), h.score) for h in r.memory_events]

        with ThreadPoolExecutor(2) as pool:
            hits = list(pool.map(one, qs))
        name = "md_pooled" if pooled else "md_user"
        rows += [
            {"set": name, "half": half(str(q["qid"])), "gold": es.qrels[q["qid"]], "hits": h}
            for q, h in zip(qs, hits, strict=True)
        ]
    return rows, vectors("bench-q6-md-user-events-v2")


if __name__ == "__main__":
    which = sys.argv[1]
    rows, V = zh() if which == "zh" else memdaily()
    (WORK / "r10").mkdir(parents=True, exist_ok=True)
    with open(WORK / "r10" / f"anchor_{which}.pkl", "wb") as f:
        pickle.dump({"rows": rows, "V": V}, f)
    print(which, len(rows), "queries,", len(V), "vectors")
