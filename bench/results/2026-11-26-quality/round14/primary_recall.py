"""Round 14: how often each mode finds the memory a dialogue was written for (relevance 2),
per set, from a ``bench.dialogue_eval`` result's top 10s: R@1 and "in the top 5".

    python bench/results/2026-11-26-quality/round14/primary_recall.py RESULT.json
"""

from __future__ import annotations

import json
import sys

import bench.dialogue_eval as de


def main() -> None:
    with open(sys.argv[1], encoding="utf-8") as f:
        res = json.load(f)
    corpus = res.get("corpus", "zh")
    gold = de.qrels(corpus)
    style = {q["qid"]: q["style"] for q in de.load_queries(corpus=corpus)}
    sets = {
        "all": None,
        **{k: v for k, v in de.SETS.items() if any(s in v for s in style.values())},
    }
    for mode, r in res["modes"].items():
        cells = []
        for name, styles in sets.items():
            n = h1 = h5 = 0
            for qid, ids in r["top10"].items():
                if styles is not None and style[qid] not in styles:
                    continue
                primary = next(d for d, g in gold[qid].items() if g == 2)
                n += 1
                h1 += primary in ids[:1]
                h5 += primary in ids[:5]
            cells.append(f"{name} ({n}) R@1 {h1 / n:.3f} top5 {h5 / n:.3f}")
        print(f"{mode:10s}", " | ".join(cells))


if __name__ == "__main__":
    main()
