"""Offline: the keyword/vector balance and the cosine scale for English (latin-script) queries.

    python -m bench.fusion_offline dump dialogue --corpus en --prefix P --out bench/work/sig-en.pkl
    python -m bench.english_offline bench/work/sig-en.pkl [bench/work/sig-en-tfidf.pkl]

For each dump of the English dev set (bench/dialogue_en/) the script prints two tables.

- **The grid.** R@5 per half and nDCG@10 for keyword weights ``w_kw`` from 0.48 (the Chinese
  default) to 0.95, with ``w_vec = 0.95 − w_kw`` and the same time and strength terms.
  Offline, the baselines bm25, vector and rrf rank the scope as one list.
- **The threshold.** For the chosen weights (``--kw``), the share of queries in which the
  memory a dialogue was written for clears 0.5 ("gold"), and the share in which some other
  memory does ("other"), for several floors of the cosine scale. The span stays 0.18, and the
  floor moves every score without changing the ranking.

The fused score is the engine's: ``w_kw·cov + w_vec·(v − floor)/0.18 + 0.03·time +
0.02·strength`` with ``v = 0.5·cos(whole) + 0.5·max_j cos(sentence j)`` (bench.calibration_offline's
``score``); the shares count the top 10, as bench.dialogue_eval does.
"""

from __future__ import annotations

import argparse
import pickle
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from bench.calibration_offline import score, shares, v
from bench.evalset import mean_metrics, metrics
from bench.fusion_offline import rrf, top

Doc = dict[str, Any]
SPAN = 0.18


def fused(d: Doc, kw: float, floor: float = 0.595) -> np.ndarray:
    """The engine's fused score with w_vec = 0.95 − w_kw (calibration_offline.score)."""
    return score(d, kw, 0.95 - kw, floor, SPAN)


def row(data: Sequence[Doc], rank: Any) -> str:
    cells = []
    for pick in (lambda d: d["half"] == "a", lambda d: d["half"] == "b", lambda d: True):
        m = mean_metrics([metrics(rank(d), d["gold"]) for d in data if pick(d)])
        cells.append(m)
    a, b, both = cells
    return (
        f"R@5 a {a['recall@5']:.3f}  b {b['recall@5']:.3f}  all {both['recall@5']:.3f}  "
        f"nDCG@10 {both['ndcg@10']:.3f}"
    )


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("dumps", type=Path, nargs="+")
    p.add_argument("--kw", type=float, default=0.82, help="the weights the floors are read at")
    p.add_argument(
        "--floors", type=float, nargs="+", default=[0.595, 0.5, 0.45, 0.4, 0.35, 0.3, 0.25, 0.2]
    )
    args = p.parse_args(argv)
    for path in args.dumps:
        with open(path, "rb") as f:
            dump = pickle.load(f)
        for style in sorted({d.get("style", "english") for d in dump}):
            data = [d for d in dump if d.get("style", "english") == style]
            print(f"== {path.name}, {style}: {len(data)} queries")
            report(data, args.kw, args.floors)
    return 0


def report(data: Sequence[Doc], kw_at: float, floors: Sequence[float]) -> None:
    print(f"{'bm25':28s} {row(data, lambda d: top(d, d['bm25'], d['bm25'] > 0))}")
    print(f"{'vector':28s} {row(data, lambda d: top(d, v(d)))}")
    print(f"{'rrf':28s} {row(data, rrf)}")
    grid = (0.48, 0.55, 0.6, 0.65, 0.7, 0.75, 0.78, 0.8, 0.82, 0.85, 0.88, 0.9, 0.93, 0.95)
    for kw in grid:
        # a hair of cosine breaks the ties of w_vec = 0 the way the engine's order would
        label = f"fusion kw {kw:.2f} vec {0.95 - kw:.2f}"
        print(f"{label:28s} {row(data, lambda d, k=kw: top(d, fused(d, k) + 1e-9 * d['cos']))}")
    print(f"threshold 0.5 at kw {kw_at:.2f} / vec {0.95 - kw_at:.2f}, span {SPAN}:")
    for floor in floors:
        g, o = shares(data, {d["qid"]: fused(d, kw_at, floor) for d in data}, 0.5)
        print(f"  floor {floor:.3f}: gold >= 0.5 in {g:.3f} of queries, other {o:.3f}")


if __name__ == "__main__":
    raise SystemExit(main())
