"""Round 10, anchor feedback (not adopted), offline on ``anchor_dump.py``'s output.

    python bench/results/2026-11-26-quality/round10/anchor_eval.py zh md > anchor.txt

The top hit stays first; every other hit gains lam · max(0, cos(hit, top) − c) / (1 − c), but
only when the top hit is a confident anchor (its fused score at least g above the second's).
Prints R@5 of the engine's ranking, then each variant's difference, per set and half, and how
often the gate fires with what it changes (lam 0.2, c 0.7, g 0.1).
"""

from __future__ import annotations

import itertools
import pickle
import sys
from typing import Any

import numpy as np

from bench.common import WORK
from bench.evalset import metrics


def rerank(
    hits: list[tuple[str, float]], V: dict[str, np.ndarray], lam: float, c: float, g: float
) -> list[str]:
    ids = [i for i, _ in hits]
    if lam <= 0 or len(hits) < 2 or hits[0][1] - hits[1][1] < g:
        return ids
    anchor = V[ids[0]]
    rest = [(s + lam * max(0.0, float(V[i] @ anchor) - c) / (1 - c), i) for i, s in hits[1:]]
    return [ids[0]] + [i for _, i in sorted(rest, key=lambda x: -x[0])]


def evaluate(rows: list[dict[str, Any]], V: dict[str, np.ndarray], **kw: float) -> dict:
    cells: dict[tuple[str, str], list[float]] = {}
    for r in rows:
        m = metrics(rerank(r["hits"], V, **kw)[:10], r["gold"])["recall@5"]
        for h in (r["half"], "all"):
            cells.setdefault((r["set"], h), []).append(m)
    return {k: sum(v) / len(v) for k, v in cells.items()}


def main(names: list[str]) -> None:
    data = []
    for name in names:
        with open(WORK / "r10" / f"anchor_{name}.pkl", "rb") as f:
            d = pickle.load(f)
        data.append((d["rows"], d["V"]))

    def run(**kw: float) -> dict:
        return {k: v for rows, V in data for k, v in evaluate(rows, V, **kw).items()}

    base = run(lam=0, c=0, g=0)
    keys = sorted(base)
    print("R@5".ljust(20), " ".join(f"{s[:9]} {h}".ljust(13) for s, h in keys))
    print("engine".ljust(20), " ".join(f"{base[k]:.3f}".ljust(13) for k in keys))
    for lam, c, g in itertools.product((0.05, 0.1, 0.2), (0.7, 0.8), (0.0, 0.05, 0.1)):
        res = run(lam=lam, c=c, g=g)
        diffs = " ".join(f"{res[k] - base[k]:+.3f}".ljust(13) for k in keys)
        print(f"lam {lam} c {c} g {g}".ljust(20), diffs)
    print("\nlam 0.2, c 0.7, g 0.1: queries, share where the gate fires, R@5 gained / lost")
    for rows, V in data:
        for name in sorted({r["set"] for r in rows}):
            sub = [r for r in rows if r["set"] == name]
            fires = sum(
                len(r["hits"]) > 1 and r["hits"][0][1] - r["hits"][1][1] >= 0.1 for r in sub
            )
            delta = [
                metrics(rerank(r["hits"], V, 0.2, 0.7, 0.1)[:10], r["gold"])["recall@5"]
                - metrics([i for i, _ in r["hits"]][:10], r["gold"])["recall@5"]
                for r in sub
            ]
            gained, lost = sum(d > 0 for d in delta), sum(d < 0 for d in delta)
            print(f"  {name:10s} {len(sub)}  fires {fires / len(sub):.2f}  +{gained} / -{lost}")


if __name__ == "__main__":
    main(sys.argv[1:])
