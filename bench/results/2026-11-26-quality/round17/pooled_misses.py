"""Round 17: print the first N pooled questions of one type (sample of 600) that fusion misses at
R@5, with the gold memories and fusion's top 5 (explain signals).

    python bench/results/2026-11-26-quality/round17/pooled_misses.py simple 12
"""

import random
import sys
from datetime import datetime

from bench.common import make_kemem
from bench.evalset import EvalSet, source_file
from bench.memdaily import AGENT, POOL, sample

km = make_kemem("bench-q14-md")
es = EvalSet.load("/work/shared/data/dev/memdaily")
docs = {d["doc_id"]: d for d in es.docs}
qs = [q for q in sample(list(es.queries), 600, seed=1) if q["meta"]["question_type"] == sys.argv[1]]
random.seed(5)
shown = 0
for q in qs:
    r = km.query(
        q["text"],
        user_id=POOL + source_file(q["namespace"]),
        agent_id=AGENT,
        limit=10,
        score_threshold=0.0,
        entity_limit=0,
        now=datetime.fromisoformat(q["timestamp"]),
        explain=True,
    )
    ids = [h.index.removeprefix(POOL) for h in r.memory_events]
    gold = list(es.qrels[q["qid"]])
    if any(g in ids[:5] for g in gold):
        continue
    shown += 1
    print("Q", q["namespace"], q["text"], "| tokens", r.additional_info.tokens)
    for g in gold:
        print("   GOLD", ids.index(g) if g in ids else "-", docs[g]["text"][:70])
    for h in r.memory_events[:5]:
        s = h.signals
        print(f"   {h.score:.3f} kw{s.kw:.2f} v{s.vec:.2f} t{s.time:.2f}", h.description[:60])
    if shown >= int(sys.argv[2]):
        break
