"""Round 7: how many words distinct events share, against restatements (``dedup.word_overlap``).

    PYTHONPATH=. python bench/results/2026-11-26-quality/round7/overlap.py

Per corpus (the Chinese demo + dialogue distractors; the English dev set), every pair of events
in one scope that m3e-small (int8) puts at cosine ≥ 0.85: the most and the 99th percentile of
their word overlap. Then restatements written for the dedup tests and docs.
"""

from __future__ import annotations

import collections
import json

import numpy as np

from bench.common import DEFAULT_MODEL_DIR, ROOT
from kemem_es.embed.onnx import Embedder
from kemem_es.memory.dedup import word_overlap

CORPORA = {
    "zh": [
        ROOT.parent / "kemem_es/demo/user_events.jsonl",
        ROOT / "dialogue/extra_events.jsonl",
        ROOT / "dialogue/extra_events_long.jsonl",
    ],
    "en": [ROOT / "dialogue_en/events.jsonl"],
}
RESTATED = [
    ("木木喜欢吃螺蛳粉", "木木特别喜欢吃螺蛳粉"),
    ("木木周末和祁煜去吃了火锅，点了双份毛肚", "周末木木和祁煜一起去吃火锅，还点了双份毛肚"),
    ("Emma works night shifts at the ER.", "Emma said she works night shifts at the ER now."),
    ("Marco's sister lives in Lisbon.", "Marco told Sol his sister lives in Lisbon."),
]


def main() -> None:
    emb = Embedder(DEFAULT_MODEL_DIR, variant="int8")
    for name, files in CORPORA.items():
        scopes: dict[tuple[str, str], list[str]] = collections.defaultdict(list)
        for path in files:
            with open(path, encoding="utf-8") as f:
                for r in map(json.loads, f):
                    scopes[(r["agent_id"], r["user_id"])].append(r["description"])
        cos, overlap = [], []
        for texts in scopes.values():
            v = emb.embed(texts)
            sims = v @ v.T
            for a, b in zip(*np.triu_indices(len(texts), 1), strict=True):
                if sims[a, b] >= 0.85:
                    cos.append(float(sims[a, b]))
                    overlap.append(word_overlap(texts[a], texts[b]))
        ov, cs = np.asarray(overlap), np.asarray(cos)
        print(
            f"{name}: {len(ov)} pairs at cosine ≥ 0.85 ({int((cs >= 0.9).sum())} ≥ 0.9); "
            f"overlap max {ov.max():.3f}, p99 {np.percentile(ov, 99):.3f}, "
            f"max at cosine ≥ 0.9 {ov[cs >= 0.9].max() if (cs >= 0.9).any() else 0:.3f}"
        )
    for a, b in RESTATED:
        v = emb.embed([a, b])
        print(f"restated: cosine {float(v[0] @ v[1]):.3f}, overlap {word_overlap(a, b):.3f}  {a}")


if __name__ == "__main__":
    main()
