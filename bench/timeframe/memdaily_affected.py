"""MemDaily per user, only the questions that name a time (the only ones time-aware ordering
can change: without a time word the query is the one before, hit for hit).

    python -m bench.timeframe.memdaily_affected --select FILE          # write the qids
    python bench/timeframe/memdaily_affected.py --qids FILE --out X    # ask them (any tree)

Run as a file with ``PYTHONPATH`` set to another tree, it asks the same questions of that
tree's code: the before/after comparison on kept indices (``bench.memdaily --keep``).
Settings as ``bench.memdaily``: limit 10, threshold 0, no entities, ``now`` = the query's
timestamp, fusion with expansion.
"""

from __future__ import annotations

import argparse
import json
import sys
from datetime import datetime
from pathlib import Path

DATA = Path("/work/shared/data/dev/memdaily")


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--data", type=Path, default=DATA)
    p.add_argument("--select", type=Path, help="write the qids of the questions with a time")
    p.add_argument("--qids", type=Path, help="ask these")
    p.add_argument("--index", action="store_true", help="index their namespaces first (fresh)")
    p.add_argument("--prefix", default="bench-facts-md")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--out", type=Path)
    args = p.parse_args()
    from bench.evalset import EvalSet

    es = EvalSet.load(args.data)
    if args.select:
        from kemem_es.text.timeframe import timeframe_of

        picked = [
            q["qid"]
            for q in es.queries
            if timeframe_of(q["text"], datetime.fromisoformat(q["timestamp"])) is not None
        ]
        args.select.write_text("\n".join(picked) + "\n")
        print(f"{len(picked)} of {len(es.queries)} questions name a time", file=sys.stderr)
        return 0
    from bench.common import drop_indices, make_kemem
    from bench.memdaily import build_records, embeddings, index_all, run_mode

    wanted = set(args.qids.read_text().split())
    queries = [q for q in es.queries if q["qid"] in wanted]
    km = make_kemem(args.prefix)
    if args.index:  # per user: a query searches its own namespace only, so only those count
        spaces = {q["namespace"] for q in queries}
        es.docs = [d for d in es.docs if d["namespace"] in spaces]
        drop_indices(km)
        km.init()
        vecs = embeddings(km, [d["text"] for d in es.docs], "int8")
        per_ns, _ = build_records(km, es, vecs, "tfidf", set())
        print(index_all(km, per_ns, "per-namespace"), file=sys.stderr)
    res = run_mode(km, es, queries, "fusion", True, False, args.workers)
    km.close()
    out = json.dumps(res, ensure_ascii=False, indent=1)
    if args.out:
        args.out.write_text(out)
    keys = ("n", "recall@5", "ndcg@10", "recall@1", "mrr")
    print({k: res.get(k) for k in keys})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
