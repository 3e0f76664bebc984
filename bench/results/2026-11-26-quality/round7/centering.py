"""Round 7, offline: does centring m3e's vectors (subtracting the corpus mean, renormalising)
help? m3e-small is strongly anisotropic: the mean of the 26,003 MemDaily vectors has norm 0.82.

    PYTHONPATH=. python bench/results/2026-11-26-quality/round7/centering.py dialogue
    PYTHONPATH=. python bench/results/2026-11-26-quality/round7/centering.py pooled --alpha 1

Reads ``bench.fusion_offline dump`` pickles (bench/work/sig-dialogue.pkl, sig-md-*.pkl), whose
memory vectors and signals are kept; the query vectors are recomputed with the package's own
pipeline (utterance, dialogue window, sentences). The mean is MemDaily's (int8, one text per
run): a property of the model on Chinese text, not of the dialogue set. Offline cosines of
uncentred vectors ("0" rows) are the dumps' own.
"""

from __future__ import annotations

import argparse
import os
import pickle
from datetime import datetime
from pathlib import Path

import numpy as np

from bench.common import WORK, make_kemem
from bench.evalset import EvalSet, metrics
from kemem_es.contract.params import QueryParams
from kemem_es.text.dialogue import context_turns, split_label

MEAN_CACHE = WORK / "emb-int8-lc-b1-26003-e307f8a71608.npy"  # bench.memdaily's vector cache
MEMDAILY = Path(os.environ.get("MEMDAILY", "../shared/data/dev/memdaily"))


def unit(x: np.ndarray) -> np.ndarray:
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


def rrf(a: np.ndarray, b: np.ndarray, k: int = 60) -> np.ndarray:
    ra, rb = np.argsort(np.argsort(-a)), np.argsort(np.argsort(-b))
    return 1 / (k + ra + 1) + 1 / (k + rb + 1)


def query_vectors(kind: str, dump: list[dict]) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    s = make_kemem("bench-q6-zh").searcher
    out = {}
    if kind == "dialogue":
        from bench.dialogue_eval import load_queries, query_text

        for q in load_queries(corpus="zh"):
            text, context = query_text(q)
            now = datetime.fromisoformat(q["now"])
            p = QueryParams(user_id="u", agent_id="a", context=context, now=now)
            turns = context_turns(p.context, p.context_turns)
            vec, _, parts = s.text.query_vector(split_label(text).text, turns, p)
            out[q["qid"]] = (np.asarray(vec), np.asarray(parts))
        return out
    from bench.memdaily import sample

    es = EvalSet.load(MEMDAILY)
    for q in sample(es.queries, len(dump), seed=1 if kind == "pooled" else 0):
        p = QueryParams(user_id="u", agent_id="a", expand=False)
        vec, _, parts = s.text.query_vector(q["text"], [], p)
        out[q["qid"]] = (np.asarray(vec), np.asarray(parts))
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("set", choices=["dialogue", "user", "pooled"])
    ap.add_argument("--alpha", type=float, nargs="+", default=[0.5, 1.0], help="× the mean")
    ap.add_argument("--spans", type=float, nargs="+", default=[0.2, 0.25, 0.3, 0.4, 0.5])
    args = ap.parse_args()
    name = {"dialogue": "sig-dialogue", "user": "sig-md-user", "pooled": "sig-md-pooled"}
    with open(WORK / f"{name[args.set]}.pkl", "rb") as f:
        dump = pickle.load(f)
    qv = query_vectors(args.set, dump)
    mean = np.load(MEAN_CACHE).mean(0)
    print(f"|mean| = {np.linalg.norm(mean):.3f}")
    for alpha in args.alpha:
        mu = alpha * mean
        res: dict[tuple[str, str], list[tuple[float, float]]] = {}
        for d in dump:
            vec, parts = qv[d["qid"]]
            vc = unit(d["V"].astype(float) - mu)
            cos = vc @ unit(vec - mu)
            scos = (vc @ unit(parts - mu).T).max(1) if len(parts) else cos
            v, v0 = 0.5 * cos + 0.5 * scos, 0.5 * d["cos"] + 0.5 * d["scos"]
            rest = 0.48 * d["cov"] + 0.03 * d["time"] + 0.02 * d["strength"]
            scores = {
                "vector0": v0,
                "vector": v,
                "rrf0": rrf(v0, d["bm25"]),
                "rrf": rrf(v, d["bm25"]),
                "fusion0": rest + 0.47 * v0 / 0.18,
                **{f"fusion span {sp}": rest + 0.47 * v / sp for sp in args.spans},
            }
            group = d.get("style", args.set)
            group = "long" if group == "long" else "short" if args.set == "dialogue" else group
            for k, sc in scores.items():
                ranked = [d["ids"][i] for i in np.argsort(-sc, kind="stable")]
                m = metrics(ranked, d["gold"])
                res.setdefault((group, k), []).append((m["recall@5"], m["ndcg@10"]))
        print(f"alpha {alpha} (0: uncentred)")
        for (group, k), x in sorted(res.items()):
            a = np.asarray(x)
            print(f"  {group:6s} {k:18s} R@5 {a[:, 0].mean():.3f}  nDCG@10 {a[:, 1].mean():.3f}")


if __name__ == "__main__":
    main()
