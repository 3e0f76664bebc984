"""Two ``bench.dialogue_eval`` runs of the same queries compared query by query: per set (style
groups as the eval reports them), the difference B − A of R@5 and nDCG@10, with a 95 % paired
bootstrap interval, and how many queries each side wins.

    python -m bench.paired A.json B.json [--mode fusion] [--mode-b vector] [--resamples 10000]

``--mode-b``: B's mode when it is not A's (two modes of one run: pass the same file twice).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from collections.abc import Sequence
from typing import Any

from bench.evalset import metrics

MEASURES = ("recall@5", "ndcg@10")


def _load(path: str) -> dict[str, Any]:
    with open(path, encoding="utf-8") as f:
        data: dict[str, Any] = json.load(f)
    return data


def interval(diffs: Sequence[float], resamples: int, seed: int = 7) -> tuple[float, float]:
    """The 2.5th and 97.5th percentiles of the mean difference over resampled queries."""
    rng = random.Random(seed)
    n = len(diffs)
    means = sorted(sum(diffs[rng.randrange(n)] for _ in range(n)) / n for _ in range(resamples))
    return means[int(0.025 * resamples)], means[int(0.975 * resamples) - 1]


def compare(
    a: dict[str, Any],
    b: dict[str, Any],
    mode: str = "fusion",
    resamples: int = 10_000,
    mode_b: str | None = None,
) -> dict[str, Any]:
    from bench.dialogue_eval import SETS, load_queries, qrels

    corpus = a.get("corpus", "zh")
    if b.get("corpus", "zh") != corpus:
        raise SystemExit("the two runs are of different sets")
    gold = qrels(corpus)
    style = {q["qid"]: q["style"] for q in load_queries(corpus=corpus)}
    ta, tb = a["modes"][mode]["top10"], b["modes"][mode_b or mode]["top10"]
    qids = [q for q in ta if q in tb]
    out: dict[str, Any] = {}
    for name, styles in SETS.items():
        ids = [q for q in qids if style.get(q) in styles]
        if not ids:
            continue
        row: dict[str, Any] = {"n": len(ids)}
        for m in MEASURES:
            va = [metrics(ta[q], gold[q])[m] for q in ids]
            vb = [metrics(tb[q], gold[q])[m] for q in ids]
            diffs = [y - x for x, y in zip(va, vb, strict=True)]
            lo, hi = interval(diffs, resamples)
            row[m] = {
                "a": round(sum(va) / len(va), 4),
                "b": round(sum(vb) / len(vb), 4),
                "diff": round(sum(diffs) / len(diffs), 4),
                "ci95": [round(lo, 4), round(hi, 4)],
                "b_better": sum(d > 0 for d in diffs),
                "a_better": sum(d < 0 for d in diffs),
            }
        out[name] = row
    return out


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("--mode", default="fusion")
    ap.add_argument("--mode-b", default=None, help="B's mode (default: --mode)")
    ap.add_argument("--resamples", type=int, default=10_000)
    ap.add_argument("--json", action="store_true", help="print JSON instead of lines")
    args = ap.parse_args(argv)
    res = compare(_load(args.a), _load(args.b), args.mode, args.resamples, args.mode_b)
    if args.json:
        json.dump(res, sys.stdout, ensure_ascii=False, indent=1)
        print()
        return 0
    for name, row in res.items():
        cells = []
        for m in MEASURES:
            c = row[m]
            cells.append(
                f"{m} {c['a']:.3f} → {c['b']:.3f} ({c['diff']:+.3f}, "
                f"[{c['ci95'][0]:+.3f}, {c['ci95'][1]:+.3f}], +{c['b_better']}/−{c['a_better']})"
            )
        print(f"{name:14s} n={row['n']:3d}  " + "   ".join(cells))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())


def pooled(pairs: Sequence[tuple[str, str]], mode: str = "fusion", resamples: int = 10_000) -> dict:
    """R@5 and nDCG@10 differences B − A pooled over the queries of several (A, B) run pairs
    (one pair per set), with the 95 % paired bootstrap interval."""
    from bench.dialogue_eval import qrels

    diffs: dict[str, list[float]] = {m: [] for m in MEASURES}
    for pa, pb in pairs:
        a, b = _load(pa), _load(pb)
        gold = qrels(a.get("corpus", "zh"))
        ta, tb = a["modes"][mode]["top10"], b["modes"][mode]["top10"]
        for q in (q for q in ta if q in tb):
            for m in MEASURES:
                diffs[m].append(metrics(tb[q], gold[q])[m] - metrics(ta[q], gold[q])[m])
    out: dict[str, Any] = {"n": len(diffs[MEASURES[0]])}
    for m, d in diffs.items():
        lo, hi = interval(d, resamples)
        out[m] = {"diff": round(sum(d) / len(d), 4), "ci95": [round(lo, 4), round(hi, 4)]}
    return out
