"""What the threshold 0.5 passes, per set, in ``bench.dialogue_eval`` runs: the share of queries
whose written-for memory clears it (``gold``) and the share where some non-relevant memory
does (``other``), and, against the first run, the mean change of the written-for memory's score
and of the best non-relevant memory's score (threshold 0, when in both top 10s).

    python -m bench.threshold_shares REF.json RUN.json [RUN.json ...] [--mode fusion]

The runs must have been made with the per-query fields (``passed``, ``scores10``).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from typing import Any


def _load(path: str) -> dict[str, Any]:
    with open(path, encoding="utf-8") as f:
        data: dict[str, Any] = json.load(f)
    return data


def _scores(run: dict[str, Any], qid: str, rel: dict[str, int]) -> tuple[float | None, float]:
    """(the written-for memory's score or None when not in the top 10, the best non-relevant
    memory's score, 0 when none is in the top 10)."""
    ids, scores = run["top10"][qid], run["scores10"][qid]
    first = next(d for d, r in rel.items() if r == 2)
    gold = next((s for d, s in zip(ids, scores, strict=True) if d == first), None)
    other = max((s for d, s in zip(ids, scores, strict=True) if d not in rel), default=0.0)
    return gold, other


def shares(paths: Sequence[str], mode: str = "fusion") -> list[dict[str, Any]]:
    from bench.dialogue_eval import SETS, load_queries, qrels

    runs = [_load(p) for p in paths]
    corpus = runs[0].get("corpus", "zh")
    gold = qrels(corpus)
    style = {q["qid"]: q["style"] for q in load_queries(corpus=corpus)}
    ref = runs[0]["modes"][mode]
    out: list[dict[str, Any]] = []
    for path, data in zip(paths, runs, strict=True):
        run = data["modes"][mode]
        for name, styles in SETS.items():
            qids = [q for q in run["passed"] if style.get(q) in styles and q in ref["passed"]]
            if not qids:
                continue
            dg, do = [], []
            for q in qids:
                g0, o0 = _scores(ref, q, gold[q])
                g1, o1 = _scores(run, q, gold[q])
                if g0 is not None and g1 is not None:
                    dg.append(g1 - g0)
                do.append(o1 - o0)
            out.append(
                {
                    "run": path,
                    "set": name,
                    "n": len(qids),
                    "gold>=0.5": round(sum(run["passed"][q][0] for q in qids) / len(qids), 3),
                    "other>=0.5": round(sum(run["passed"][q][1] for q in qids) / len(qids), 3),
                    "d_gold_score": round(sum(dg) / len(dg), 4) if dg else None,
                    "d_best_other_score": round(sum(do) / len(do), 4),
                }
            )
    return out


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    ap.add_argument("runs", nargs="+")
    ap.add_argument("--mode", default="fusion")
    args = ap.parse_args(argv)
    print("| run | set | n | gold ≥ 0.5 | other ≥ 0.5 | Δ gold score | Δ best other score |")
    print("|---|---|---|---|---|---|---|")
    for r in shares(args.runs, args.mode):
        print(
            f"| {r['run']} | {r['set']} | {r['n']} | {r['gold>=0.5']:.3f} | "
            f"{r['other>=0.5']:.3f} | {r['d_gold_score']} | {r['d_best_other_score']} |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
