"""Round 7, offline: would an event's place and scene (tokenised, as one more coverage field)
add keyword evidence? 312 of the 368 place/scene values of the Chinese dev corpus are not
written in the event's description (澜城美术学院宿舍, 深夜安慰, 陪室友吃火锅).

    PYTHONPATH=. python bench/results/2026-11-26-quality/round7/scope_idf.py dump   (first)
    PYTHONPATH=. python bench/results/2026-11-26-quality/round7/place_scene.py

Uses ``scope_idf.py``'s per-word match matrix and adds, per query word, a match on the place or
scene tokens at ``factor`` (a word's coverage takes its best field, as the engine's dis_max).
"""

import pickle
import sys
from pathlib import Path

import numpy as np

from bench.common import WORK, make_kemem
from bench.dialogue_eval import load_queries
from bench.evalset import metrics
from kemem_es.search import events as ev
from kemem_es.store.layout import DATABASES, index_alias

sys.path.insert(0, str(Path(__file__).resolve().parent))  # beside scope_idf.py
from scope_idf import query_plan

with open(WORK / "scope-idf-dialogue.pkl", "rb") as f:
    D = {d["qid"]: d for d in pickle.load(f)}
s = make_kemem("bench-q6-zh").searcher
tok = s.text.tokenizer
src = {}


def scope(p):
    for db in DATABASES:
        alias = index_alias(s.engine.settings.index_prefix, db, "events")
        body = {
            "size": 10000,
            "query": ev.candidate_query(db, p, []),
            "_source": ["id", "place", "scene"],
        }
        for h in s.engine.search(alias, body, ignore_unavailable=True)["hits"]["hits"]:
            x = h["_source"]
            src[x["id"]] = set(
                t.lower()
                for t in tok.tokenize((x.get("place") or "") + " " + (x.get("scene") or ""))
            )


res = {}
for q in load_queries(corpus="zh"):
    d = D[q["qid"]]
    p, vector, parts, words = query_plan(s, q)
    if d["ids"][0] not in src:
        scope(p)
    weighted = [w for w in words if w.weighted and w.weight > 0]
    assert len(weighted) == len(d["weights"])
    P = (
        np.array(
            [
                [1.0 if (len(w.toks) == 1 and w.toks[0] in src[i]) else 0.0 for i in d["ids"]]
                for w in weighted
            ]
        )
        if weighted
        else np.zeros((0, len(d["ids"])))
    )
    sh = d["weights"] / d["weights"].sum() if len(d["weights"]) else d["weights"]
    v = 0.5 * d["cos"] + 0.5 * d["scos"]
    g = ("long " if d["style"] == "long" else "short ") + (
        "a" if int(q["qid"].rsplit("-", 1)[1]) % 2 else "b"
    )
    for f in (0.0, 0.3, 0.5, 0.7, 0.9):
        M = np.maximum(d["M"], f * P) if len(sh) else d["M"]
        cov = np.minimum(sh @ M, 1.0) if len(sh) else np.zeros(len(d["ids"]))
        sc = 0.48 * cov + 0.47 * v / 0.18 + 0.03 * d["time"]
        ranked = [d["ids"][i] for i in np.argsort(-sc, kind="stable")]
        res.setdefault(f, {}).setdefault(g, []).append(metrics(ranked, d["gold"])["recall@5"])
for f, r in res.items():
    print(
        f"place/scene factor {f}: "
        + " | ".join(f"{k} {np.mean(v):.3f}" for k, v in sorted(r.items()))
    )
