"""Round 7, offline: what scoring a memory by its best sentence would give the fused score on
the English sets (round 6 measured it for the vector alone: 0.530 → 0.667 on the sessions).

    python -m bench.fusion_offline dump dialogue --corpus en --prefix bench-q6-en-written \
        --out bench/work/sig-en6.pkl
    PYTHONPATH=. python bench/results/2026-11-26-quality/round7/english_passages.py

The dump holds each query's keyword coverage, BM25, time and strength for every memory in scope;
query vectors are recomputed with the package's pipeline (checked against the dump's cosines),
each memory's sentences embedded on their own. Vector variants: ``whole`` (the stored vector, as
today), ``best`` (max over sentences), ``mix`` (½ whole + ½ best); fused with the latin
profile's balance (kw 0.82) and two lighter ones, on the latin scale's span (0.18).
"""

from __future__ import annotations

import json
import pickle
import re
from datetime import datetime

import numpy as np

from bench.common import ROOT, WORK, make_kemem
from bench.dialogue_eval import load_queries, query_text
from bench.evalset import metrics
from kemem_es.contract.params import QueryParams
from kemem_es.text.dialogue import context_turns, split_label


def rrf(a: np.ndarray, b: np.ndarray, k: int = 60) -> np.ndarray:
    ra, rb = np.argsort(np.argsort(-a)), np.argsort(np.argsort(-b))
    return 1 / (k + ra + 1) + 1 / (k + rb + 1)


def main() -> None:
    with open(WORK / "sig-en6.pkl", "rb") as f:
        dump = pickle.load(f)
    with open(ROOT / "dialogue_en" / "events.jsonl", encoding="utf-8") as f:
        text = {r["id"]: r["description"] for r in map(json.loads, f)}
    s = make_kemem("bench-q6-en-written").searcher
    qv = {}
    for q in load_queries(corpus="en"):
        utterance, context = query_text(q)
        p = QueryParams(
            user_id="u", agent_id="a", context=context, now=datetime.fromisoformat(q["now"])
        )
        turns = context_turns(p.context, p.context_turns)
        vec, _, parts = s.text.query_vector(split_label(utterance).text, turns, p)
        qv[q["qid"]] = (np.asarray(vec), np.asarray(parts))
    sentences: dict[str, np.ndarray] = {}
    res: dict[tuple[str, str], list[float]] = {}
    err = 0.0
    for d in dump:
        q, parts = qv[d["qid"]]
        err = max(err, float(np.abs(d["V"].astype(float) @ q - d["cos"]).max()))
        for i in d["ids"]:
            if i not in sentences:
                pieces = [x for x in re.split(r"(?<=[.!?])\s+", text[i]) if x]
                sentences[i] = s.text.embedder.embed(pieces).astype(float)
        qs = np.vstack([q[None, :], parts]) if len(parts) else q[None, :]
        best = np.asarray([(sentences[i] @ qs.T).max() for i in d["ids"]])
        whole = 0.5 * d["cos"] + 0.5 * d["scos"]
        variants = {"whole": whole, "mix": 0.5 * whole + 0.5 * best, "best": best}

        scores = {"bm25": d["bm25"]}
        for vn, v in variants.items():
            scores[f"vector {vn}"] = v
            scores[f"rrf {vn}"] = rrf(v, d["bm25"])
            for kw in (0.5, 0.65, 0.82):
                rest = 0.03 * d["time"] + 0.02 * d["strength"]
                scores[f"fusion kw {kw} {vn}"] = kw * d["cov"] + (0.95 - kw) * v / 0.18 + rest
        for name, score in scores.items():
            ranked = [d["ids"][i] for i in np.argsort(-score, kind="stable")]
            res.setdefault((d["style"], name), []).append(metrics(ranked, d["gold"])["recall@5"])
    print(f"query vectors reproduce the dump's cosines to {err:.1e}")
    for (style, name), x in sorted(res.items()):
        print(f"{style:17s} {name:22s} R@5 {np.mean(x):.3f}  n={len(x)}")


if __name__ == "__main__":
    main()
