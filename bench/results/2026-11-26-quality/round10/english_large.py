"""Round 10: what term proximity costs an English user with many long memories.

    KEMEM_ES_URL=http://127.0.0.1:9261 KEMEM_MODEL_DIR=../shared/models/m3e-small-onnx \\
        python bench/results/2026-11-26-quality/round10/english_large.py [N]

One user with N (20,000) English memories of 8–12 sentences each, drawn from the English dev
corpus's sentences (so the words and their spacing are real English), with random unit vectors
(latency only: the scope is above 2,000, so every query takes the approximate path, ANN ∪
keyword window). The 150 session questions of the dev set are asked in alternating passes with
``proximity_share`` 0 and at the latin default, one at a time; medians of the whole query
(``timings_ms.total``) and of the event round trip. The indices are dropped afterwards.
"""

from __future__ import annotations

import json
import random
import re
import statistics
import sys
from datetime import datetime, timedelta

import numpy as np

from bench.common import drop_indices, make_kemem
from bench.dialogue_eval import CORPORA, load_queries
from kemem_es import EventRecord

N = int(sys.argv[1]) if len(sys.argv) > 1 else 20_000
USER, AGENT = "u_heavy_en", "nova"


def memories(n: int, seed: int = 5) -> list[EventRecord]:
    rng, vec_rng = random.Random(seed), np.random.default_rng(seed)
    with open(CORPORA["en"] / "events.jsonl", encoding="utf-8") as f:
        texts = [json.loads(line)["description"] for line in f]
    pool = [s for t in texts for s in re.split(r"(?<=[.!?])\s+", t) if len(s) > 20]
    start = datetime(2022, 1, 1)
    out = []
    for i in range(n):
        v = vec_rng.standard_normal(512)
        text = " ".join(rng.sample(pool, rng.randint(8, 12)))
        when = (start + timedelta(hours=7 * i)).strftime("%Y-%m-%d %H:%M:%S")
        unit = (v / np.linalg.norm(v)).tolist()
        fields = {"agent_id": AGENT, "user_id": USER, "created_at": when, "vector": unit}
        out.append(EventRecord(id=f"en-heavy-{i:05d}", description=text, **fields))
    return out


def main() -> None:
    km = make_kemem("bench-q10-en-large")
    drop_indices(km)
    km.init()
    records = memories(N)
    for lo in range(0, N, 2000):
        km.index_records(records[lo : lo + 2000], kind="events", db="user")
    km.engine.client.indices.refresh(index="bench-q10-en-large-*")
    asked = load_queries(styles=["english_session"], corpus="en")
    questions = [q["turns"][-1]["text"] for q in asked]
    runs: dict[str, dict[str, list[float]]] = {"0": {}, "default": {}}
    try:
        for _ in range(2):  # warm-up pass, then two measured passes per setting
            for q in questions[:20]:
                km.query(q, user_id=USER, agent_id=AGENT, score_threshold=0)
        for _ in range(2):
            for name, extra in (("0", {"proximity_share": 0.0}), ("default", {})):
                for q in questions:
                    r = km.query(q, user_id=USER, agent_id=AGENT, score_threshold=0, **extra)
                    t = r.additional_info.timings_ms
                    runs[name].setdefault("total", []).append(t["total"])
                    runs[name].setdefault("search_events", []).append(t["search_events"])
    finally:
        drop_indices(km)
    print(f"{N} English memories of one user, {len(questions)} questions, two passes each")
    for name, cells in runs.items():
        med = {k: round(statistics.median(v), 2) for k, v in cells.items()}
        print(f"  proximity_share {name:7s} median ms: {med}")


if __name__ == "__main__":
    main()
