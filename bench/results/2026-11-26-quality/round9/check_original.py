"""The check set (bench/dialogue_check) on the package as it was before issue 12 (`a443060`,
the code the review measured fusion R@5 0.469 on): the same memories, queries and options as
``bench.dialogue_eval --corpus check`` (last turn as the query, earlier turns as ``context``
lines, limit 10, threshold 0, now 2025-10-01 12:00, every other option at its default).

    git worktree add /work/wt-r0 a443060
    KEMEM_ES_URL=http://127.0.0.1:9261 PYTHONPATH=/work/wt-r0 python \\
        bench/results/2026-11-26-quality/round9/check_original.py /work/main/bench/dialogue_check \\
        [STYLE]

STYLE: ``check`` (the Chinese dialogues) or ``check_session`` (the English questions); the
memories of both are indexed either way.
"""

from __future__ import annotations

import json
import math
import sys
from datetime import datetime
from pathlib import Path

from kemem_es import Kemem
from kemem_es.models import EventRecord

MODES = ("fusion", "bm25", "vector", "rrf", "two_stage")


def metrics(ranked: list[str], gold: dict[str, int]) -> dict[str, float]:
    """R@5 and nDCG@10 as bench/evalset.py computes them."""
    top = ranked[:10]
    dcg = sum((2 ** gold[d] - 1) / math.log2(i + 2) for i, d in enumerate(top) if d in gold)
    ideal = sorted(gold.values(), reverse=True)
    idcg = sum((2**g - 1) / math.log2(i + 2) for i, g in enumerate(ideal[:10]))
    return {"recall@5": sum(d in gold for d in top[:5]) / len(gold), "ndcg@10": dcg / idcg}


def main() -> None:
    folder = Path(sys.argv[1])
    km = Kemem(
        model_dir="/work/shared/models/m3e-small-onnx",
        index_prefix="bench-q9-orig",
        model_variant="int8",
    )
    km.init(recreate=True)
    with open(folder / "events.jsonl", encoding="utf-8") as f:
        records = [EventRecord(**json.loads(line)) for line in f]
    km.index_records(records, kind="events", db="user")
    km.engine.client.indices.refresh(index="bench-q9-orig*")
    with open(folder / "queries.jsonl", encoding="utf-8") as f:
        queries = [json.loads(line) for line in f]
    style = sys.argv[2] if len(sys.argv) > 2 else "check"
    queries = [q for q in queries if q["style"] == style]
    gold: dict[str, dict[str, int]] = {}
    for line in (folder / "qrels.tsv").read_text(encoding="utf-8").splitlines()[1:]:
        qid, doc, rel = line.split("\t")
        gold.setdefault(qid, {})[doc] = int(rel)
    out = {}
    for mode in MODES:
        rows = []
        for q in queries:
            *prev, last = q["turns"]
            resp = km.query(
                last["text"],
                user_id=q["user_id"],
                agent_id=q["agent_id"],
                context="\n".join(f"{t['speaker']}：{t['text']}" for t in prev),
                limit=10,
                score_threshold=0.0,
                now=datetime.fromisoformat(q["now"]),
                mode=mode,
            )
            rows.append(metrics([e.index for e in resp.memory_events], gold[q["qid"]]))
        out[mode] = {m: round(sum(r[m] for r in rows) / len(rows), 3) for m in rows[0]}
        print(mode, out[mode], flush=True)


if __name__ == "__main__":
    main()
