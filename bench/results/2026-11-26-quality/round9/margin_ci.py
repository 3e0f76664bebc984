"""Paired bootstrap of fusion's R@5 margin over each mode, read off a dialogue_eval result's top
10s (2,000 resamples of the queries, seed 7), with how many queries each side wins.

    python bench/results/2026-11-26-quality/round9/margin_ci.py RESULT.json CORPUS [STYLE ...]
"""

from __future__ import annotations

import json
import random
import sys

import bench.dialogue_eval as de
from bench.evalset import metrics


def main() -> None:
    with open(sys.argv[1], encoding="utf-8") as f:
        res = json.load(f)
    corpus, styles = sys.argv[2], set(sys.argv[3:])
    gold = de.qrels(corpus)
    style = {q["qid"]: q["style"] for q in de.load_queries(corpus=corpus)}
    r5 = {
        mode: {
            qid: metrics(ids, gold[qid])["recall@5"]
            for qid, ids in r["top10"].items()
            if not styles or style[qid] in styles
        }
        for mode, r in res["modes"].items()
    }
    qids = sorted(r5["fusion"])
    rng = random.Random(7)
    for mode in r5:
        if mode == "fusion":
            continue
        d = [r5["fusion"][q] - r5[mode][q] for q in qids]
        boots = sorted(sum(rng.choice(d) for _ in d) / len(d) for _ in range(2000))
        better, worse = sum(x > 0 for x in d), sum(x < 0 for x in d)
        print(
            f"fusion - {mode:9s} {sum(d) / len(d):+.3f}  95% CI [{boots[50]:+.3f}, "
            f"{boots[1949]:+.3f}]  queries better {better} / worse {worse}  (n={len(d)})"
        )


if __name__ == "__main__":
    main()
