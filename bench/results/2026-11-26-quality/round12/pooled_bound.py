"""How far any ranking of the engine's signals could go on MemDaily pooled: a gradient-boosted
classifier (scikit-learn, not a kemem-es dependency) fitted on one half of the pooled sample and
scored on the other, over every signal ``bench.fusion_offline dump`` records — keyword coverage,
BM25, cosine, best-sentence cosine — plus, per signal, its rank in the scope, its z-score over
the scope and its distance to the scope's best; with and without the time and strength terms.

    python -m bench.fusion_offline dump memdaily --pooled --n 600 --prefix bench-q6-md \
        --drop-vectors --out bench/work/r12/sig-md-pooled.pkl
    python bench/results/2026-11-26-quality/round12/pooled_bound.py bench/work/r12/sig-md-pooled.pkl
"""

from __future__ import annotations

import pickle
import sys
from typing import Any

import numpy as np
from sklearn.ensemble import HistGradientBoostingClassifier

from bench.evalset import mean_metrics, metrics
from bench.fusion_offline import fusion, rrf, top, vec

Doc = dict[str, Any]
SIGNALS = ("cov", "bm25", "cos", "scos")


def features(d: Doc, with_time: bool) -> np.ndarray:
    cols = [d[s].astype(np.float64) for s in SIGNALS]
    if with_time:
        cols += [d["time"].astype(np.float64), d["strength"].astype(np.float64)]
    for s in SIGNALS:
        x = d[s].astype(np.float64)
        cols += [np.log1p((-x).argsort().argsort()), (x - x.mean()) / (x.std() + 1e-9), x - x.max()]
    return np.stack(cols, 1)


def gold_mask(d: Doc) -> np.ndarray:
    gold = set(d["gold"])
    return np.array([i in gold for i in d["ids"]])


def r5(data: list[Doc], half: str, rank: Any) -> float:
    return mean_metrics([metrics(rank(d), d["gold"]) for d in data if d["half"] == half])[
        "recall@5"
    ]


def main() -> None:
    with open(sys.argv[1], "rb") as f:
        data: list[Doc] = pickle.load(f)
    rng = np.random.default_rng(0)
    print(f"{len(data)} queries; R@5 on the half the model was not fitted on")
    head = ("fitted on → scored on", "with time", "without", "fusion", "rrf", "vector")
    print(f"{head[0]:22s} {head[1]:>10s} {head[2]:>8s} {head[3]:>7s} {head[4]:>6s} {head[5]:>7s}")
    for fit, score in (("a", "b"), ("b", "a")):
        cells = []
        for with_time in (True, False):
            xs, ys = [], []
            for d in data:
                if d["half"] != fit:
                    continue
                x, y = features(d, with_time), gold_mask(d)
                keep = y | (rng.random(len(y)) < 0.05)  # every gold memory, 5 % of the rest
                xs.append(x[keep])
                ys.append(y[keep])
            model = HistGradientBoostingClassifier(
                max_iter=300, learning_rate=0.05, random_state=0
            ).fit(np.concatenate(xs), np.concatenate(ys))

            def learned(d: Doc, m: Any = model, t: bool = with_time) -> list[str]:
                return top(d, m.predict_proba(features(d, t))[:, 1])

            cells.append(r5(data, score, learned))
        fused = r5(data, score, lambda d: top(d, fusion(d)))
        base = r5(data, score, rrf), r5(data, score, lambda d: top(d, vec(d)))
        print(
            f"{fit} → {score:18s} {cells[0]:10.3f} {cells[1]:8.3f} {fused:7.3f} {base[0]:6.3f} "
            f"{base[1]:7.3f}"
        )


if __name__ == "__main__":
    main()
