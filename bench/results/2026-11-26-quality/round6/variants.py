"""Offline: BM25 added to the latin-profile fused score, on a dump of the English dev set.

python bench/results/2026-11-26-quality/round6/variants.py bench/work/s6/sig-en.pkl
(the dump: python -m bench.fusion_offline dump dialogue --corpus en --prefix P --out F)
"""

from __future__ import annotations

import pickle
import sys
from collections.abc import Callable

import numpy as np

from bench.calibration_offline import score
from bench.evalset import mean_metrics, metrics


def rank(d: dict, s: np.ndarray) -> list[str]:
    return [d["ids"][i] for i in np.argsort(-s, kind="stable")[:10]]


def fused(d: dict) -> np.ndarray:
    """The engine's fused score under the latin profile (kw 0.82 / vec 0.13, 0.45-0.63)."""
    return score(d, 0.82, 0.13, 0.45, 0.18)


def main(path: str) -> None:
    with open(path, "rb") as f:
        dump = pickle.load(f)
    variants: dict[str, Callable[[dict], np.ndarray]] = {
        "fusion": fused,
        "bm25": lambda d: d["bm25"],
    }
    for lam in (0.05, 0.1, 0.2, 0.3):
        variants[f"+{lam} bm25sat"] = lambda d, w=lam: fused(d) + w * d["bm25"] / (d["bm25"] + 4)
        variants[f"+{lam} bm25/max"] = lambda d, w=lam: (
            fused(d) + w * d["bm25"] / max(d["bm25"].max(), 1e-9)
        )
    for style in ("english", "english_question", "english_session"):
        data = [d for d in dump if d["style"] == style]
        print(style, len(data))
        for name, f in variants.items():
            cells = []
            for half in ("a", "b", None):
                rows = [d for d in data if half is None or d["half"] == half]
                m = mean_metrics([metrics(rank(d, f(d)), d["gold"]) for d in rows])
                cells.append(f"{m['recall@5']:.3f}")
            print(f"  {name:16s} R@5 a/b/all {' '.join(cells)}  nDCG {m['ndcg@10']:.3f}")


if __name__ == "__main__":
    main(sys.argv[1])
