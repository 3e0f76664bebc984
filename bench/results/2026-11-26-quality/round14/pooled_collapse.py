"""Round 14: MemDaily pooled, with word-for-word copies collapsed in each ranking (the best
scored copy kept, the others dropped), offline over a ``bench.fusion_offline`` dump.

    python -m bench.fusion_offline dump memdaily --pooled --n 600 --drop-vectors --out sig.pkl
    python bench/results/2026-11-26-quality/round14/pooled_collapse.py sig.pkl [DATA_DIR]
"""

from __future__ import annotations

import gzip
import json
import pickle
import re
import sys

import numpy as np

from bench.evalset import mean_metrics, metrics
from bench.fusion_offline import fusion, vec


def main() -> None:
    with open(sys.argv[1], "rb") as f:
        data = pickle.load(f)
    folder = sys.argv[2] if len(sys.argv) > 2 else "../shared/data/dev/memdaily"
    text = {}
    with gzip.open(f"{folder}/corpus.jsonl.gz", "rt", encoding="utf-8") as f:
        for line in f:
            c = json.loads(line)
            text[c["doc_id"]] = re.sub(r"[\s。，,.!！?？、]", "", c["text"])

    def collapse(ids: list[str]) -> list[str]:
        seen: set[str] = set()
        out = []
        for i in ids:
            if text.get(i, i) not in seen:
                seen.add(text.get(i, i))
                out.append(i)
        return out

    def ranked(d: dict, score: np.ndarray, mask: np.ndarray | None = None) -> list[str]:
        return [d["ids"][i] for i in np.argsort(-score, kind="stable") if mask is None or mask[i]]

    def rrf_score(d: dict) -> np.ndarray:
        s = np.zeros(len(d["ids"]))
        for x, mask in ((d["bm25"], d["bm25"] > 0), (vec(d), None)):
            order = [i for i in np.argsort(-x, kind="stable") if mask is None or mask[i]]
            for r, i in enumerate(order[:40], 1):
                s[i] += 1 / (60 + r)
        return s

    rows: dict[str, list] = {}
    for d in data:
        rs = rrf_score(d)
        for name, ids in (
            ("fusion", ranked(d, fusion(d))),
            ("rrf", ranked(d, rs, rs > 0)),
            ("vector", ranked(d, vec(d))),
        ):
            rows.setdefault(name, []).append(metrics(ids[:10], d["gold"]))
            rows.setdefault(name + ", copies collapsed", []).append(
                metrics(collapse(ids)[:10], d["gold"])
            )
    for name, ms in rows.items():
        m = mean_metrics(ms)
        print(f"{name:28s} R@5 {m['recall@5']:.4f} nDCG@10 {m['ndcg@10']:.4f}")


if __name__ == "__main__":
    main()
